package drill

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/internal/etcdproc"
	"github.com/dlockgo/dlock/internal/zkproc"
)

// ensembleTick is the ZooKeeper ensemble's tick: sessions of 1 to 10 s can
// be negotiated (2 to 20 ticks).
const ensembleTick = 500 * time.Millisecond

// startEnsemble starts a 3-member cluster of a backend under dir.
var startEnsemble = map[string]func(ctx context.Context, dir string) (*ensemble, error){
	backend.Etcd:      startEtcdEnsemble,
	backend.ZooKeeper: startZKEnsemble,
}

// ensembleKinds names the backends startEnsemble starts, in
// backend.Kinds' order: "etcd or zookeeper".
func ensembleKinds() string {
	var ks []string
	for _, k := range backend.Kinds {
		if startEnsemble[k] != nil {
			ks = append(ks, k)
		}
	}
	return strings.Join(ks, " or ")
}

// member is one server of an ensemble (an etcd member, a ZooKeeper server).
type member interface {
	Kill() error
	Restart(ctx context.Context) error
	Pause() error
	Resume() error
}

// ensemble is a 3-member cluster the drill injects faults into, with a
// cuttable proxy in front of every member's client address (the clients
// connect through them, so cut-clients can cut a member's clients off
// while its peers still reach it) and the links between members behind
// proxies too (so partition can isolate a member from its peers while its
// clients still reach it).
type ensemble struct {
	members []member
	px      []*etcdproc.Proxy
	leader  func(ctx context.Context) (member, error)
	// leaderIn waits for the leader among the members other than skip.
	leaderIn func(ctx context.Context, skip int) (member, error)
	isolate  func(i int) error // cut every link between member i and its peers
	heal     func() error      // bring every link between members up
	close    func() error
}

// newEnsemble puts a proxy in front of each client address (addrs[i] is
// members[i]'s); e's leaderIn, isolate and heal are the caller's to set.
func newEnsemble(members []member, addrs []string, leader func(context.Context) (member, error), closeFn func() error) (*ensemble, error) {
	e := &ensemble{members: members, leader: leader, close: closeFn}
	for _, a := range addrs {
		p, err := etcdproc.NewProxy(a)
		if err != nil {
			e.Close()
			return nil, err
		}
		e.px = append(e.px, p)
	}
	return e, nil
}

// Addr is the client endpoints (the proxies), as backend.Open takes them.
func (e *ensemble) Addr() string {
	out := make([]string, len(e.px))
	for i, p := range e.px {
		out[i] = p.Addr()
	}
	return strings.Join(out, ",")
}

// Leader returns the index of the current leader.
func (e *ensemble) Leader(ctx context.Context) (int, error) {
	m, err := e.leader(ctx)
	return e.index(m, err)
}

// LeaderOthers waits for a leader among the members other than skip (the
// majority's, after member skip was isolated) and returns its index.
func (e *ensemble) LeaderOthers(ctx context.Context, skip int) (int, error) {
	m, err := e.leaderIn(ctx, skip)
	return e.index(m, err)
}

func (e *ensemble) index(m member, err error) (int, error) {
	if err != nil {
		return -1, err
	}
	if i := slices.Index(e.members, m); i >= 0 {
		return i, nil
	}
	return -1, errors.New("the leader is not a member")
}

// faultOps says, for each of ConsensusFaults, how it strikes member i of
// an ensemble and how it is undone: SIGKILL and a restart (waited for up
// to 60 s), SIGSTOP and SIGCONT, the member cut off from its peers (its
// clients still reach it) and the links healed, a black hole between the
// member and its clients (its peers still reach it) and the link healed.
var faultOps = map[string]struct {
	inject func(e *ensemble, i int) error
	undo   func(ctx context.Context, e *ensemble, i int) error
}{
	FaultKill: {
		func(e *ensemble, i int) error { return e.members[i].Kill() },
		func(ctx context.Context, e *ensemble, i int) error {
			rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			return e.members[i].Restart(rctx)
		},
	},
	FaultPause: {
		func(e *ensemble, i int) error { return e.members[i].Pause() },
		func(_ context.Context, e *ensemble, i int) error { return e.members[i].Resume() },
	},
	FaultPartition: {
		func(e *ensemble, i int) error { return e.isolate(i) },
		func(_ context.Context, e *ensemble, _ int) error { return e.heal() },
	},
	FaultCutClients: {
		func(e *ensemble, i int) error { e.px[i].Cut(); return nil },
		func(_ context.Context, e *ensemble, i int) error { e.px[i].Heal(); return nil },
	},
}

// Close stops the proxies and the cluster.
func (e *ensemble) Close() error {
	var errs []error
	for _, p := range e.px {
		errs = append(errs, p.Close())
	}
	return errors.Join(append(errs, e.close())...)
}

// startEtcdEnsemble starts a 3-member etcd cluster (etcd's default
// heartbeat and election timeout, fsync on, peer links through proxies).
func startEtcdEnsemble(ctx context.Context, dir string) (*ensemble, error) {
	return etcdEnsemble(ctx, dir, false)
}

// etcdEnsemble is startEtcdEnsemble; fast elects with a 50 ms heartbeat
// and a 500 ms election timeout instead of etcd's 100 ms and 1 s.
func etcdEnsemble(ctx context.Context, dir string, fast bool) (*ensemble, error) {
	c, err := etcdproc.StartCluster(ctx, 3, etcdproc.Options{Dir: dir, PeerProxies: true, FastElection: fast})
	if err != nil {
		return nil, err
	}
	members, addrs := make([]member, len(c.Members)), make([]string, len(c.Members))
	for i, m := range c.Members {
		members[i], addrs[i] = m, m.ClientAddr()
	}
	e, err := newEnsemble(members, addrs, func(ctx context.Context) (member, error) { return c.Leader(ctx) }, c.Close)
	if err != nil {
		return nil, err
	}
	e.leaderIn = func(ctx context.Context, skip int) (member, error) {
		return c.LeaderIn(ctx, slices.Delete(slices.Clone(c.Members), skip, skip+1)...)
	}
	e.isolate = func(i int) error { return c.Isolate(c.Members[i]) }
	e.heal = c.Heal
	return e, nil
}

// startZKEnsemble starts a 3-server ZooKeeper ensemble (forceSync on, peer
// links through proxies).
func startZKEnsemble(ctx context.Context, dir string) (*ensemble, error) {
	z, err := zkproc.StartEnsemble(ctx, 3, zkproc.Options{Dir: dir, ForceSync: true, TickTime: ensembleTick, PeerProxies: true})
	if err != nil {
		return nil, err
	}
	members := make([]member, len(z.Servers))
	for i, s := range z.Servers {
		members[i] = s
	}
	e, err := newEnsemble(members, z.Addrs(), func(ctx context.Context) (member, error) { return z.Leader(ctx) }, z.Close)
	if err != nil {
		return nil, err
	}
	e.leaderIn = func(ctx context.Context, skip int) (member, error) {
		return z.LeaderIn(ctx, slices.Delete(slices.Clone(z.Servers), skip, skip+1)...)
	}
	e.isolate = func(i int) error { return z.Isolate(z.Servers[i]) }
	e.heal = z.Heal
	return e, nil
}
