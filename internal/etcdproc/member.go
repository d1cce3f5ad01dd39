package etcdproc

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/internal/proc"
)

const (
	// readyTimeout caps how long a start waits for /health.
	readyTimeout = 20 * time.Second
	logName      = "etcd.log"
)

// process is embedded under a name of its own, so that its methods are
// the Member's but the field is not exported.
type process = proc.Process

// Member is one etcd process. Its methods are safe for concurrent use.
//
// From the embedded process it has Running, PID, Kill, Stop (SIGTERM, then
// SIGKILL after 5 s), Pause (SIGSTOP, returning once every thread has
// stopped: it keeps its ports and accepts connections but answers nothing
// and sends nothing to its peers), Resume, LogTail, and Restart(ctx),
// which starts it again with the same ports, arguments and data and
// returns once it is healthy (in a cluster: once it has rejoined a
// quorum); after Close (the member's, for good, or the cluster's) it
// fails.
type Member struct {
	name       string
	dir        string // the member's own directory: data/ and etcd.log
	clientPort int
	peerPort   int
	*process   // nil until the cluster launches it
}

// Name returns the member's name (m1, m2, ...).
func (m *Member) Name() string { return m.name }

// Endpoint returns the member's client URL, "http://127.0.0.1:PORT".
func (m *Member) Endpoint() string { return "http://" + m.ClientAddr() }

// ClientAddr returns the member's client address, "127.0.0.1:PORT".
func (m *Member) ClientAddr() string { return "127.0.0.1:" + strconv.Itoa(m.clientPort) }

// PeerAddr returns the address the member listens on for its peers.
func (m *Member) PeerAddr() string { return "127.0.0.1:" + strconv.Itoa(m.peerPort) }

// Dir returns the member's directory: its data directory (data/) and its
// log (etcd.log).
func (m *Member) Dir() string { return m.dir }

// memberArgs returns the member's etcd arguments; peers' are the peer URLs
// the others reach it at, advertised the address it is reached at.
func memberArgs(name, dir string, clientPort, peerPort int, advertised, cluster, token string, o Options) []string {
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	args := []string{
		"--name", name,
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", advertised,
		"--initial-cluster", cluster,
		"--initial-cluster-state", "new",
		"--initial-cluster-token", token,
		"--logger", "zap", "--log-level", "warn",
	}
	if o.NoFsync {
		args = append(args, "--unsafe-no-fsync")
	}
	if o.FastElection {
		args = append(args, "--heartbeat-interval", "50", "--election-timeout", "500")
	}
	return append(args, o.Args...)
}

// spec returns how to run the member.
func (m *Member) spec(bin string, args []string) proc.Spec {
	return proc.Spec{
		Name:   "etcd " + m.name,
		Path:   bin,
		Args:   args,
		Dir:    m.dir,
		Output: filepath.Join(m.dir, logName),
		Ready: func(ctx context.Context, _ int) error {
			return m.Healthy(ctx)
		},
		ReadyTimeout: readyTimeout,
	}
}

// httpClient makes one-off requests: no idle connections are kept.
var httpClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// get returns the body of GET path on the member's client URL, bounded by
// ctx and one second.
func (m *Member) get(ctx context.Context, path string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.Endpoint()+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Healthy returns nil if the member's /health says it is healthy (it has
// a leader and serves reads), else why not.
func (m *Member) Healthy(ctx context.Context) error {
	code, body, err := m.get(ctx, "/health")
	if err != nil {
		return err
	}
	if code != http.StatusOK || !strings.Contains(body, `"health":"true"`) {
		return fmt.Errorf("etcdproc: %s /health: %d %s", m.name, code, strings.TrimSpace(body))
	}
	return nil
}

// IsLeader reports whether the member says it is the leader (its /metrics
// has etcd_server_is_leader 1).
func (m *Member) IsLeader(ctx context.Context) (bool, error) {
	v, err := m.Metric(ctx, "etcd_server_is_leader")
	return v == 1, err
}

// Metric returns the value of the metric called name (with no labels) on
// the member's /metrics, e.g. etcd_server_proposals_committed_total.
func (m *Member) Metric(ctx context.Context, name string) (float64, error) {
	code, body, err := m.get(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("etcdproc: %s /metrics: %d", m.name, code)
	}
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("etcdproc: %s /metrics has no %s", m.name, name)
}
