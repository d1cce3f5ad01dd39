package etcdproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// readyTimeout caps how long a start waits for /health.
	readyTimeout = 20 * time.Second
	// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	stopTimeout = 5 * time.Second
	logName     = "etcd.log"
)

// Member is one etcd process. Its methods are safe for concurrent use.
type Member struct {
	name       string
	bin        string
	dir        string // the member's own directory: data/ and etcd.log
	clientPort int
	peerPort   int
	args       []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited and been reaped
	paused bool
	closed bool
}

// Name returns the member's name (m1, m2, ...).
func (m *Member) Name() string { return m.name }

// Endpoint returns the member's client URL, "http://127.0.0.1:PORT".
func (m *Member) Endpoint() string { return "http://" + m.ClientAddr() }

// ClientAddr returns the member's client address, "127.0.0.1:PORT".
func (m *Member) ClientAddr() string { return "127.0.0.1:" + strconv.Itoa(m.clientPort) }

// PeerAddr returns the member's peer address.
func (m *Member) PeerAddr() string { return "127.0.0.1:" + strconv.Itoa(m.peerPort) }

// Dir returns the member's directory: its data directory (data/) and its
// log (etcd.log).
func (m *Member) Dir() string { return m.dir }

// args returns the member's etcd arguments.
func memberArgs(name, dir string, clientPort, peerPort int, cluster, token string, o Options) []string {
	client := "http://127.0.0.1:" + strconv.Itoa(clientPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	args := []string{
		"--name", name,
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
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

// start runs the process; it does not wait for it to be ready. m.mu must
// be held.
func (m *Member) start() error {
	out, err := os.OpenFile(filepath.Join(m.dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("etcdproc: %w", err)
	}
	cmd := exec.Command(m.bin, m.args...)
	cmd.Dir = m.dir
	cmd.Stdout, cmd.Stderr = out, out // a file, so Wait starts no copying goroutine
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	out.Close()
	if err != nil {
		return fmt.Errorf("etcdproc: starting %s: %w", m.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	m.cmd, m.done, m.paused = cmd, done, false
	return nil
}

// awaitHealthy polls /health until the member says it is healthy, the
// process exits, or ctx ends (bounded by readyTimeout).
func (m *Member) awaitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	m.mu.Lock()
	done := m.done
	m.mu.Unlock()
	backoff := 10 * time.Millisecond
	for {
		err := m.Healthy(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("etcdproc: %s exited during start-up\nlog tail (%s):\n%s", m.name, m.dir, m.LogTail())
		case <-ctx.Done():
			return fmt.Errorf("etcdproc: waiting for %s on %s: %w (last: %v)\nlog tail:\n%s", m.name, m.ClientAddr(), ctx.Err(), err, m.LogTail())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 100*time.Millisecond)
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

// LogTail returns the last lines of the member's log.
func (m *Member) LogTail() string {
	data, _ := os.ReadFile(filepath.Join(m.dir, logName))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// running reports whether the process is alive. m.mu must be held.
func (m *Member) running() bool {
	if m.done == nil {
		return false
	}
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// Running reports whether the process is alive (a paused one is).
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running()
}

// PID returns the pid of the running process, or 0.
func (m *Member) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running() {
		return 0
	}
	return m.cmd.Process.Pid
}

// signal sends sig to the process. m.mu must be held.
func (m *Member) signal(sig syscall.Signal) error {
	if !m.running() {
		return fmt.Errorf("etcdproc: %s is not running", m.name)
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("etcdproc: %v to %s (pid %d): %w", sig, m.name, m.cmd.Process.Pid, err)
	}
	return nil
}

// kill sends SIGKILL and waits until the process is reaped. m.mu must be
// held.
func (m *Member) kill() error {
	if !m.running() {
		return nil
	}
	err := m.cmd.Process.Kill()
	<-m.done
	m.paused = false
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("etcdproc: kill %s: %w", m.name, err)
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to exit; a no-op if it is
// not running.
func (m *Member) Kill() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kill()
}

// Stop sends SIGTERM (and SIGCONT to a paused process) and waits for the
// process to exit, sending SIGKILL after 5 seconds.
func (m *Member) Stop() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running() {
		return nil
	}
	if err := m.signal(syscall.SIGTERM); err != nil {
		return err
	}
	if m.paused {
		_ = m.signal(syscall.SIGCONT)
		m.paused = false
	}
	select {
	case <-m.done:
		return nil
	case <-time.After(stopTimeout):
		return m.kill()
	}
}

// Pause stops the process with SIGSTOP and returns once every thread of
// it has stopped: it keeps its ports and accepts connections but answers
// nothing (and sends nothing to its peers) until Resume.
func (m *Member) Pause() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	m.paused = true
	return awaitStopped(m.cmd.Process.Pid)
}

// awaitStopped waits (up to 5 s) until /proc says every thread of pid is
// stopped: a signal is delivered after kill(2) returns.
func awaitStopped(pid int) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		stopped, err := allStopped(pid)
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("etcdproc: pid %d not stopped 5 s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

func allStopped(pid int) (bool, error) {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(tasks) == 0 {
		return false, fmt.Errorf("etcdproc: reading the threads of pid %d: %v", pid, err)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended
		}
		// pid (comm) state ...: the state follows the last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("etcdproc: unexpected %s", t)
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false, nil
		}
	}
	return true, nil
}

// Resume continues a paused process with SIGCONT.
func (m *Member) Resume() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.signal(syscall.SIGCONT); err != nil {
		return err
	}
	m.paused = false
	return nil
}

// Restart kills the process if it runs and starts it again with the same
// ports, arguments and data, returning once it is healthy (in a cluster:
// once it has rejoined a quorum).
func (m *Member) Restart(ctx context.Context) error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return fmt.Errorf("etcdproc: restart of closed member %s", m.name)
	}
	err := m.kill()
	if err == nil {
		err = m.start()
	}
	m.mu.Unlock()
	if err != nil {
		return err
	}
	return m.awaitHealthy(ctx)
}

// close kills the process (resuming it first) and waits for it. The
// directory is the cluster's to remove.
func (m *Member) close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.paused {
		_ = m.signal(syscall.SIGCONT)
	}
	return m.kill()
}
