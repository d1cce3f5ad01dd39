package etcdproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/internal/freeport"
)

// Options configures Start and StartCluster.
type Options struct {
	// Dir is the parent of the cluster's temporary directory; "" means the
	// system temporary directory.
	Dir string
	// NoFsync runs every member with --unsafe-no-fsync.
	NoFsync bool
	// FastElection runs every member with a 50 ms heartbeat and a 500 ms
	// election timeout (etcd's defaults: 100 ms and 1 s).
	FastElection bool
	// Args are extra etcd arguments for every member.
	Args []string
}

// Cluster is a set of etcd members started together.
type Cluster struct {
	Members []*Member
	dir     string
}

// startAttempts is how often a cluster is started on fresh ports when
// another process took one of its ports in the meantime.
const startAttempts = 3

// Start starts a single-member etcd and returns once it is healthy.
func Start(ctx context.Context, o Options) (*Cluster, error) { return StartCluster(ctx, 1, o) }

// StartCluster starts n members (1..9) forming one new cluster, each on its
// own free client and peer ports on 127.0.0.1, and returns once every member
// is healthy (bounded by ctx and 20 seconds). On failure nothing is left
// running and the error includes the failed member's log tail.
func StartCluster(ctx context.Context, n int, o Options) (*Cluster, error) {
	if n < 1 || n > 9 {
		return nil, fmt.Errorf("etcdproc: %d members (want 1..9)", n)
	}
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		c, err := startOnce(ctx, bin, n, o)
		if err == nil {
			return c, nil
		}
		if attempt == startAttempts || !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
}

func startOnce(ctx context.Context, bin string, n int, o Options) (*Cluster, error) {
	dir, err := os.MkdirTemp(o.Dir, "etcd-")
	if err != nil {
		return nil, fmt.Errorf("etcdproc: %w", err)
	}
	c := &Cluster{dir: dir}
	var initial []string
	for i := range n {
		m := &Member{name: "m" + strconv.Itoa(i+1), bin: bin, dir: filepath.Join(dir, "m"+strconv.Itoa(i+1))}
		if m.clientPort, err = freeport.Take(false); err == nil {
			m.peerPort, err = freeport.Take(false)
		}
		if err == nil {
			err = os.Mkdir(m.dir, 0o755)
		}
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("etcdproc: %w", err)
		}
		initial = append(initial, m.name+"=http://"+m.PeerAddr())
		c.Members = append(c.Members, m)
	}
	token := filepath.Base(dir)
	for _, m := range c.Members {
		m.args = memberArgs(m.name, m.dir, m.clientPort, m.peerPort, strings.Join(initial, ","), token, o)
		m.mu.Lock()
		err = m.start()
		m.mu.Unlock()
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, m := range c.Members {
		if err := m.awaitHealthy(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Endpoints returns every member's client URL.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.Endpoint()
	}
	return eps
}

// Leader returns the member that says it is the leader, polling until one
// does or ctx ends (a cluster between leaders has none for a moment).
// Members that do not answer (killed, paused) are passed over.
func (c *Cluster) Leader(ctx context.Context) (*Member, error) {
	var last error
	for {
		for _, m := range c.Members {
			if !m.Running() {
				continue
			}
			ok, err := m.IsLeader(ctx)
			if err != nil {
				last = err
				continue
			}
			if ok {
				return m, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("etcdproc: no leader: %w (last error: %v)", ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Healthy waits until every running member is healthy, or ctx ends.
func (c *Cluster) Healthy(ctx context.Context) error {
	for _, m := range c.Members {
		if !m.Running() {
			continue
		}
		for {
			err := m.Healthy(ctx)
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("etcdproc: %s not healthy: %w (%v)", m.name, ctx.Err(), err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// Close kills every member, waits for them and removes the cluster's
// directory. It is idempotent.
func (c *Cluster) Close() error {
	var errs []error
	for _, m := range c.Members {
		errs = append(errs, m.close())
	}
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}
