package drill

import (
	"context"
	"fmt"
	"strconv"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/internal/redisproc"
)

// soakTarget is what the soak's faults strike: the servers of one backend,
// started for the soak.
type soakTarget interface {
	// addr is the address the clients open (backend.Open).
	addr() string
	// inject strikes fault kind now and returns what it struck and how to
	// undo it.
	inject(ctx context.Context, kind string, session time.Duration) (target string, undo func(context.Context) error, err error)
	close() error
}

// startSoakTarget starts the servers of kind under dir: one redis-server
// (appendonly, appendfsync always: a SIGKILL and restart keeps the locks)
// behind a proxy the clients connect through, or a 3-member etcd cluster or
// ZooKeeper ensemble with every client and peer link behind a proxy.
func startSoakTarget(ctx context.Context, kind, dir string, session time.Duration) (soakTarget, error) {
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if kind == backend.Redis {
		return startRedisSoakTarget(sctx, dir)
	}
	start, ok := startEnsemble[kind]
	if !ok {
		return nil, fmt.Errorf("soak: no %s harness built in", kind)
	}
	ens, err := start(sctx, dir)
	if err != nil {
		return nil, err
	}
	return ensembleTarget{ens}, nil
}

// redisTarget is one redis-server behind a toxiproxy.
type redisTarget struct {
	server *redisproc.Server
	px     *proxies
	link   *toxiproxy.Proxy
}

func startRedisSoakTarget(ctx context.Context, dir string) (*redisTarget, error) {
	srv, err := redisproc.Start(ctx, redisproc.Options{Dir: dir, Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
	if err != nil {
		return nil, err
	}
	t := &redisTarget{server: srv, px: newProxies()}
	if t.link, err = t.px.add("redis", srv.Addr()); err != nil {
		t.close()
		return nil, err
	}
	return t, nil
}

func (t *redisTarget) addr() string { return "redis://" + t.link.Listen }

func (t *redisTarget) inject(ctx context.Context, kind string, session time.Duration) (string, func(context.Context) error, error) {
	const who = "redis-server"
	switch kind {
	case FaultPause:
		return who, func(context.Context) error { return t.server.Resume() }, t.server.Pause()
	case FaultKill:
		return who, func(context.Context) error { return t.server.Restart() }, t.server.Kill()
	case FaultCutClients:
		return who, func(context.Context) error { return heal(t.link) }, blackhole(t.link)
	case FaultLatency:
		undo := func(ctx context.Context) error { return t.link.Toxics.RemoveToxic(ctx, "latency") }
		return who, undo, delay(t.link, session+500*time.Millisecond)
	}
	return who, nil, fmt.Errorf("soak: no fault %q on redis", kind)
}

func (t *redisTarget) close() error {
	t.px.close()
	return t.server.Close()
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

func (t ensembleTarget) close() error { return t.e.Close() }
