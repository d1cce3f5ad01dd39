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
	"github.com/dlockgo/dlock/internal/peerlink"
	"github.com/dlockgo/dlock/internal/proc"
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
	// PeerProxies routes the members' peer traffic through proxies in
	// front of their peer ports, so that Isolate, Partition and Heal can
	// cut and heal the links between members; clients still reach every
	// member directly.
	PeerProxies bool
	// Args are extra etcd arguments for every member.
	Args []string
}

// ErrNoPeerProxies is returned by Isolate, Partition and Heal on a cluster
// started without Options.PeerProxies.
var ErrNoPeerProxies = peerlink.ErrNoMesh

// links is embedded under a name of its own, so that its methods are the
// Cluster's but the field is not exported.
type links = peerlink.Mesh[*Member]

// Cluster is a set of etcd members started together.
//
// With Options.PeerProxies it has, from the embedded links between its
// members: Isolate(m), which cuts every link between m and the others (m
// keeps running and its clients still reach it, but it neither hears from
// nor reaches its peers: an isolated leader loses its quorum);
// Partition(groups...), which cuts the links between members of different
// groups and brings up those within a group (every member in exactly one
// group, else an error and no change); Heal, which brings every link up
// (the connections that were cut are closed, so the members dial again);
// IsCut(a, b); and Others(m). Without PeerProxies they return
// ErrNoPeerProxies.
type Cluster struct {
	Members []*Member
	dir     string
	*links  // nil without Options.PeerProxies
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
	return proc.Retry(startAttempts, func() (*Cluster, error) { return startOnce(ctx, bin, n, o) })
}

func startOnce(ctx context.Context, bin string, n int, o Options) (*Cluster, error) {
	dir, err := os.MkdirTemp(o.Dir, "etcd-")
	if err != nil {
		return nil, fmt.Errorf("etcdproc: %w", err)
	}
	c := &Cluster{dir: dir}
	fail := func(err error) (*Cluster, error) {
		c.Close()
		return nil, err
	}
	// Every port first (with PeerProxies the peer URLs are the proxies'),
	// then every member, then the proxies, then the processes: a proxy
	// asks the members for their pids as soon as it runs.
	peers := make([]string, n) // the address the others reach member i at
	var initial []string
	for i := range n {
		m := &Member{name: "m" + strconv.Itoa(i+1), dir: filepath.Join(dir, "m"+strconv.Itoa(i+1))}
		if m.clientPort, err = freeport.Take(false); err == nil {
			m.peerPort, err = freeport.Take(false)
		}
		peers[i] = m.PeerAddr()
		if err == nil && o.PeerProxies {
			peers[i], err = freeport.Addr()
		}
		if err == nil {
			err = os.Mkdir(m.dir, 0o755)
		}
		if err != nil {
			return fail(fmt.Errorf("etcdproc: %w", err))
		}
		initial = append(initial, m.name+"=http://"+peers[i])
		c.Members = append(c.Members, m)
	}
	token := filepath.Base(dir)
	for i, m := range c.Members {
		args := memberArgs(m.name, m.dir, m.clientPort, m.peerPort, "http://"+peers[i], strings.Join(initial, ","), token, o)
		if m.process, err = proc.New(m.spec(bin, args)); err != nil {
			return fail(err)
		}
	}
	if o.PeerProxies {
		c.links = peerlink.NewMesh(c.Members)
		for i, m := range c.Members {
			if _, err := peerlink.Front(c.links, m, peers[i], m.PeerAddr(), nil); err != nil {
				return fail(fmt.Errorf("etcdproc: %w", err))
			}
		}
	}
	for _, m := range c.Members {
		if err := proc.Launch(m.process); err != nil {
			return fail(err)
		}
	}
	for _, m := range c.Members {
		if err := m.Await(ctx); err != nil {
			return fail(err)
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
func (c *Cluster) Leader(ctx context.Context) (*Member, error) { return c.LeaderIn(ctx, c.Members...) }

// LeaderIn returns the member of members that says it is the leader, as
// Leader does: after a partition, LeaderIn(ctx, majority...) waits for the
// majority's own leader while the member cut off may still say it leads.
func (c *Cluster) LeaderIn(ctx context.Context, members ...*Member) (*Member, error) {
	var last error
	for {
		for _, m := range members {
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

// Close kills every member, waits for them, closes the peer proxies and
// removes the cluster's directory. It is idempotent.
func (c *Cluster) Close() error {
	var errs []error
	for _, m := range c.Members {
		if m.process != nil {
			errs = append(errs, m.process.Close())
		}
	}
	errs = append(errs, c.links.Close())
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}
