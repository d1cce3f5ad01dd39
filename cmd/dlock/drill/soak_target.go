package drill

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/internal/freeport"
	"github.com/dlockgo/dlock/internal/redisproc"
)

// soakTarget is what the soak's faults strike: the servers of one backend,
// started for the soak.
type soakTarget interface {
	// addr is the address the clients open (backend.Open).
	addr() string
	// options are the soak's acquire options on this target.
	options() []dlock.Option
	// inject strikes fault kind now and returns what it struck and how to
	// undo it.
	inject(ctx context.Context, kind string, session time.Duration) (target string, undo func(context.Context) error, err error)
	close() error
}

// startSoakTarget starts the servers of kind under dir: a Redis master, its
// replica and three Sentinels (redisTarget), or a 3-member etcd cluster or
// ZooKeeper ensemble with every client and peer link behind a proxy.
func startSoakTarget(ctx context.Context, kind, dir string, session time.Duration, fastElection bool) (soakTarget, error) {
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if kind == backend.Redis {
		return startRedisSoakTarget(sctx, dir)
	}
	start, ok := startEnsemble[kind]
	if !ok {
		return nil, fmt.Errorf("soak: no %s harness built in", kind)
	}
	if fastElection {
		start = func(ctx context.Context, dir string) (*ensemble, error) { return etcdEnsemble(ctx, dir, true) }
	}
	ens, err := start(sctx, dir)
	if err != nil {
		return nil, err
	}
	return ensembleTarget{ens}, nil
}

// redisTarget is a master, its replica and three Sentinels. Every server
// has a proxy of its own, the one address its clients, the Sentinels and
// its replica reach it at (it announces that address as a replica), so
// that the faults strike the master of the moment through its proxy. The
// Sentinels fail over only when asked (FaultFailover): their
// down-after-milliseconds outlasts every other fault.
type redisTarget struct {
	servers   [2]*redisproc.Server
	links     [2]*toxiproxy.Proxy
	sentinels *redisproc.Sentinel
	px        *proxies
	master    int // index of the master of the moment (servers, links)
}

// redisSoakArgs keep the locks on disk (a SIGKILL and restart keeps them)
// and start replication at once.
var redisSoakArgs = []string{"--appendonly", "yes", "--appendfsync", "always", "--repl-diskless-sync-delay", "0"}

func startRedisSoakTarget(ctx context.Context, dir string) (*redisTarget, error) {
	t := &redisTarget{px: newProxies()}
	fail := func(err error) (*redisTarget, error) {
		t.close()
		return nil, err
	}
	for i := range t.servers {
		port, err := freeport.Take(false)
		if err != nil {
			return fail(err)
		}
		if t.links[i], err = t.px.add("redis-"+strconv.Itoa(i), "127.0.0.1:"+strconv.Itoa(port)); err != nil {
			return fail(err)
		}
		_, announce, _ := net.SplitHostPort(t.links[i].Listen)
		args := slices.Concat(redisSoakArgs, []string{"--replica-announce-ip", "127.0.0.1", "--replica-announce-port", announce})
		// Every server starts as a master, so that a restart (FaultKill
		// strikes only the master of the moment) brings it back as one; the
		// replica is made one at run time.
		if t.servers[i], err = redisproc.Start(ctx, redisproc.Options{Dir: dir, Port: port, Args: args}); err != nil {
			return fail(err)
		}
	}
	if err := redisproc.ReplicaOf(ctx, t.servers[1].Addr(), t.links[0].Listen); err != nil {
		return fail(err)
	}
	if err := redisproc.WaitReplicas(ctx, t.servers[0].Addr(), 1); err != nil {
		return fail(err)
	}
	_, port, _ := net.SplitHostPort(t.links[0].Listen)
	masterPort, _ := strconv.Atoi(port)
	var err error
	t.sentinels, err = redisproc.StartSentinels(ctx, redisproc.SentinelOptions{Dir: dir, Replicas: 1,
		DownAfter: redisSentinelDownAfter, FailoverTimeout: 10 * time.Second}, masterPort)
	if err != nil {
		return fail(err)
	}
	return t, nil
}

// redisSentinelDownAfter is the Sentinels' down-after-milliseconds: longer
// than any fault but FaultFailover lasts, so that only that one fails over.
const redisSentinelDownAfter = time.Minute

// addr is a Sentinel URL: every client follows the master through failovers.
func (t *redisTarget) addr() string { return t.sentinels.URL() }

// options: a grant counts once the replica has it (WAIT), so that a
// failover does not promote a replica without it. A master without its
// replica (right after a failover, until the old master has rejoined as a
// replica) grants nothing.
func (t *redisTarget) options() []dlock.Option {
	return []dlock.Option{dlock.ReplicaAck(1, 100*time.Millisecond)}
}

func (t *redisTarget) inject(ctx context.Context, kind string, session time.Duration) (string, func(context.Context) error, error) {
	m := t.master
	who, srv, link := "redis m"+strconv.Itoa(m)+" (master)", t.servers[m], t.links[m]
	switch kind {
	case FaultPause:
		return who, func(context.Context) error { return srv.Resume() }, srv.Pause()
	case FaultKill:
		return who, func(context.Context) error { return srv.Restart() }, srv.Kill()
	case FaultCutClients:
		return who, func(context.Context) error { return heal(link) }, blackhole(link)
	case FaultLatency:
		undo := func(ctx context.Context) error { return link.Toxics.RemoveToxic(ctx, "latency") }
		return who, undo, delay(link, session+500*time.Millisecond)
	case FaultFailover:
		return t.failover(ctx)
	}
	return who, nil, fmt.Errorf("soak: no fault %q on redis", kind)
}

// failover asks the Sentinels to promote the replica and returns once they
// all name it the master; undoing it waits until the old master has
// rejoined as the new one's replica (the Sentinels reconfigure it some
// seconds after the promotion: 11 s after the strike in our runs), so that
// the next fault meets a whole group.
func (t *redisTarget) failover(ctx context.Context) (string, func(context.Context) error, error) {
	old, next := t.master, 1-t.master
	who := "redis m" + strconv.Itoa(old) + " → m" + strconv.Itoa(next)
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := t.sentinels.Failover(fctx); err != nil {
		return who, nil, err
	}
	got, err := t.sentinels.WaitForFailover(fctx, t.links[old].Listen)
	if err != nil {
		return who, nil, err
	}
	if got != t.links[next].Listen {
		return who, nil, fmt.Errorf("soak: the Sentinels promoted %s, want %s", got, t.links[next].Listen)
	}
	t.master = next
	undo := func(ctx context.Context) error {
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return redisproc.WaitReplicas(wctx, t.servers[next].Addr(), 1)
	}
	return who, undo, nil
}

func (t *redisTarget) close() error {
	t.px.close()
	var errs []error
	if t.sentinels != nil {
		errs = append(errs, t.sentinels.Close())
	}
	for _, s := range t.servers {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}

// ensembleTarget is an etcd cluster or a ZooKeeper ensemble; every fault
// strikes the leader of the moment (faultOps).
type ensembleTarget struct{ e *ensemble }

func (t ensembleTarget) addr() string { return t.e.Addr() }

func (t ensembleTarget) inject(ctx context.Context, kind string, _ time.Duration) (string, func(context.Context) error, error) {
	op, ok := faultOps[kind]
	if !ok {
		return "", nil, fmt.Errorf("soak: no fault %q on an ensemble", kind)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	leader, err := t.e.Leader(lctx)
	cancel()
	if err != nil {
		return "no leader", nil, err
	}
	undo := func(ctx context.Context) error { return op.undo(ctx, t.e, leader) }
	return "leader m" + strconv.Itoa(leader), undo, op.inject(t.e, leader)
}

func (t ensembleTarget) options() []dlock.Option { return nil }

func (t ensembleTarget) close() error { return t.e.Close() }
