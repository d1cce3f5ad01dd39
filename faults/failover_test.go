package faults_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
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
			cs = append(cs, newClient(t, newRDB(t, n.Addr()), dlock.Config{WatchdogTimeout: wd, Logger: l}))
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
