package faults_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/faults"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// TestSentinelFailover kills the master of a Sentinel setup (one replica,
// three Sentinels) while every shape is held through failover clients.
// Replication is asynchronous, so the new master may have lost a grant or a
// renewal: the mutex model does not apply, the fenced register and the
// tokens must hold, and the double grants are counted.
func TestSentinelFailover(t *testing.T) {
	noLeaks(t)
	s := redistest.StartSentinel(t, redisproc.SentinelOptions{Replicas: 1, DownAfter: 500 * time.Millisecond, FailoverTimeout: 2 * time.Second})
	st := store(t)
	fo := func(tweak ...func(*redis.FailoverOptions)) *redis.Client {
		o := &redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs()}
		for _, f := range tweak {
			f(o)
		}
		c := redis.NewFailoverClient(o)
		t.Cleanup(func() { c.Close() })
		return c
	}
	probe := fo(func(o *redis.FailoverOptions) {
		o.ReadTimeout, o.WriteTimeout, o.DialTimeout = 100*time.Millisecond, 100*time.Millisecond, 200*time.Millisecond
		o.ContextTimeoutEnabled = true
	})
	scs := make([]*scenario, len(shapes))
	for i, sh := range shapes {
		scs[i] = setUp(t, sh, "fo-"+sh.name, fo(), fo(), probe, st, wd)
	}
	for _, sc := range scs {
		if !sc.ew.MustSample() {
			t.Fatalf("%s: cannot read the holder's expiry", sc.sh.name)
		}
	}
	old := s.Master.Addr()
	at := time.Now()
	if err := s.Master.Kill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr, err := s.WaitForFailover(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover %s -> %s in %v", old, addr, time.Since(at))
	for i, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			scs[i].t = t
			report(t, scs[i].finish("sentinel-failover", at, mayLose, false))
		})
	}
}

// TestRedLockMinorityFaults holds a RedLock over three masters while one of
// them is frozen (SIGSTOP) for three watchdog timeouts, and then killed and
// restarted empty: a majority still holds the lock, so the holder keeps it,
// the contender waits, and the mutex model holds.
func TestRedLockMinorityFaults(t *testing.T) {
	noLeaks(t)
	nodes := redistest.StartMasters(t, 3)
	st := store(t)
	log := &syncBuffer{}
	clients := func() []*dlock.Client {
		var cs []*dlock.Client
		for i, n := range nodes {
			l := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})).With("node", i)
			cs = append(cs, newClient(t, newRDB(t, n.Addr()), dlock.Config{TTL: wd, Logger: l}))
		}
		return cs
	}
	as, bs := clients(), clients()
	red := shape{name: "RedLock",
		holder:    func(_ *dlock.Client, n string) dlock.Locker { return dlock.NewRedLock(n, as...) },
		contender: func(_ *dlock.Client, n string) dlock.Locker { return dlock.NewRedLock(n, bs...) },
		expiry:    keyExpiry("")}
	probe := probeClient(t, nodes[0])
	sc := setUp(t, red, "red", newRDB(t, nodes[0].Addr()), newRDB(t, nodes[0].Addr()), probe, st, wd)
	sc.renewer = as[0]
	at := time.Now()
	if err := nodes[2].Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * wd) // the fault is a duration
	if err := nodes[2].Resume(); err != nil {
		t.Fatal(err)
	}
	if err := nodes[2].Restart(); err != nil {
		t.Fatal(err)
	}
	if sc.hl.l.Err() != nil {
		t.Errorf("RedLock lost with a majority of its nodes up: %v", sc.hl.l.Err())
	}
	report(t, sc.finish("minority-SIGSTOP-then-restart-empty", at, mustKeep, true))
	if t.Failed() {
		t.Logf("RedLock clients' log:\n%s", log.String())
	}
	for i := range nodes {
		noZombie(t, "A", as[i])
		noZombie(t, "B", bs[i])
	}
}

// TestRedLockSlowNode: a RedLock over 3 masters, one of which forgot the
// lock (FLUSHALL, as an empty restart does) and one whose replies come 300
// ms late, longer than a renewal tick (watchdog timeout 800 ms / 3), shorter
// than the lease. Every renewal's quorum is reached only when the slow node
// answers, well within the lease: the holder must keep the lock. It failed
// before renewal rounds were given the whole lease to confirm (they were
// given up after one tick). That is the one way we found for the minority
// restart above to lose its lock (about once in 15 runs of the whole suite
// on a loaded machine, not caught in 80 runs of that test alone, 40 of them
// under stress-ng): after the empty restart, both other nodes must answer
// within a tick, and two slow rounds in a row lost the hold.
func TestRedLockSlowNode(t *testing.T) {
	noLeaks(t)
	nodes := redistest.StartMasters(t, 3)
	px, err := faults.NewProxy(nodes[1].Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	const wd = 800 * time.Millisecond
	addrs := []string{nodes[0].Addr(), px.Addr(), nodes[2].Addr()}
	var cs []*dlock.Client
	var slow *redis.Client
	for _, a := range addrs {
		rdb := newRDB(t, a)
		cs = append(cs, newClient(t, rdb, dlock.Config{TTL: wd}))
		if a == px.Addr() {
			slow = rdb
		}
	}
	ctx := context.Background()
	// Connections opened before the delay, enough for the rounds that
	// overlap: a new one would take several late round trips (HELLO,
	// CLIENT SETINFO) before its first command. Held at once, so that each
	// is a connection of its own, then given back to the pool.
	var conns []*redis.Conn
	for range 6 {
		c := slow.Conn()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Close()
	}
	l, err := dlock.NewRedLock("slow", cs...).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, wd); err != nil { // the extension's script loaded on every node
		t.Fatal(err)
	}
	// Extend returns on a quorum: wait until the slow node's call has
	// answered too (no connection of its pool in use), so that no reply of
	// the warm-up, and no script load, is caught by the delay.
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if st := slow.PoolStats(); st.IdleConns == st.TotalConns {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the slow node's pool never settled: %+v", slow.PoolStats())
		}
	}
	if err := px.Delay(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := newRDB(t, nodes[2].Addr()).FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(4 * wd); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if err := l.Err(); err != nil {
			t.Fatalf("lost with 2 of 3 nodes holding it and answering within the lease: %v", err)
		}
	}
	if err := l.Verify(ctx); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock: %v", err)
	}
	for i, c := range cs {
		noZombie(t, "node "+strconv.Itoa(i), c)
	}
}
