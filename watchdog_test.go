package dlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The watchdog renews N leases in ceil(N/batch) round trips per tick.
func TestWatchdogBatches(t *testing.T) {
	const n, batch = 1000, 100
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	counter := &pipeCounter{}
	rdb.AddHook(counter)
	c := newClient(t, rdb, dlock.Config{TTL: 600 * time.Millisecond, RenewBatch: batch})
	ctx := context.Background()
	leases := make([]*dlock.Lease, n)
	for i := range leases {
		l, err := c.Mutex("b:"+strconv.Itoa(i)).Acquire(ctx, dlock.Wait(0))
		if err != nil {
			t.Fatal(err)
		}
		leases[i] = l
	}
	// A tick that began while the leases were being taken renews fewer:
	// judge the ticks after it (the last 3n renewals).
	counter.reset()
	deadline := time.Now().Add(20 * time.Second)
	for counter.cmdsSeen() < 4*n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	pipes, cmds, sizes := counter.snapshot()
	if cmds < 4*n {
		t.Fatalf("only %d renewals in 20s", cmds)
	}
	for i, seen := len(sizes)-1, 0; seen < 3*n; i-- {
		if sizes[i] != batch {
			t.Fatalf("a renewal pipeline carried %d renewals, want %d (sizes %v)", sizes[i], batch, sizes)
		}
		seen += sizes[i]
	}
	for _, l := range leases {
		if err := l.Err(); err != nil {
			t.Fatalf("a lease was lost while renewed: %v", err)
		}
	}
	t.Logf("%d renewals in %d round trips (%d leases, batch %d)", cmds, pipes, n, batch)
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

type pipeCounter struct {
	mu    sync.Mutex
	sizes []int
	cmds  int
}

func (p *pipeCounter) reset() { p.mu.Lock(); p.sizes, p.cmds = nil, 0; p.mu.Unlock() }
func (p *pipeCounter) cmdsSeen() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmds
}
func (p *pipeCounter) snapshot() (int, int, []int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.sizes), p.cmds, append([]int(nil), p.sizes...)
}
func (p *pipeCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && (cmds[0].Name() == "evalsha" || cmds[0].Name() == "fcall") {
			p.mu.Lock()
			p.sizes = append(p.sizes, len(cmds))
			p.cmds += len(cmds)
			p.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// waitRenewals waits (bounded) until c's watchdog has sent n more renewal
// round trips.
func waitRenewals(t *testing.T, c *dlock.Client, n int64) {
	t.Helper()
	want := c.Stats().RenewalRoundTrips + n
	deadline := time.Now().Add(10 * time.Second)
	for c.Stats().RenewalRoundTrips < want {
		if time.Now().After(deadline) {
			t.Fatalf("the watchdog sent no %d renewals within 10s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// With the watchdog (timeout 600 ms) the lock stays held through 3 s of work.
func TestWatchdogKeepsLock(t *testing.T) {
	rdb := server(t)
	a := newClient(t, rdb, dlock.Config{TTL: 600 * time.Millisecond})
	b := newClient(t, rdb)
	ctx := context.Background()
	l, err := a.Mutex("wd").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	tries := 0
	for time.Now().Before(deadline) {
		tries++
		if _, err := b.Mutex("wd").Acquire(ctx, dlock.Wait(100*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("another client acquired a watchdog-kept lock (try %d): %v", tries, err)
		}
	}
	if err := l.Verify(ctx); err != nil {
		t.Fatalf("after 3s: %v", err)
	}
	if s := a.Stats(); s.RenewalRoundTrips < 10 {
		t.Fatalf("renewal round trips %d, want >= 10 in 3s at 200ms", s.RenewalRoundTrips)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A paused server (SIGSTOP) longer than the lease: the client gives the lease
// up by its own clock, no later than the lease's end counted from before the
// last successful renewal (or the acquire) was sent.
func TestLostWhenServerPaused(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	t.Run("fixed lease", func(t *testing.T) {
		c := newClient(t, rdb)
		sent := time.Now()
		l, err := c.Mutex("paused").Acquire(ctx, dlock.LeaseTime(400*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		defer srv.Resume()
		// At the lease's end on the client's clock the lease is lost,
		// however late the timer goroutine runs.
		time.Sleep(time.Until(sent.Add(400 * time.Millisecond)))
		if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("at the lease's end: Err = %v", err)
		}
		if !closedWithin(l.Done(), time.Second) {
			t.Fatal("Done not closed")
		}
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("watchdog", func(t *testing.T) {
		const timeout = 600 * time.Millisecond
		c := newClient(t, rdb, dlock.Config{TTL: timeout})
		l, err := c.Lock("paused-wd").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		waitRenewals(t, c, 1)
		paused := time.Now()
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		defer srv.Resume()
		// The last renewal was sent before the pause, so one lease after
		// the pause the lease is lost on the client's clock.
		time.Sleep(time.Until(paused.Add(timeout)))
		if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("one lease after the pause: Err = %v", err)
		}
		if !closedWithin(l.Done(), time.Second) {
			t.Fatal("Done not closed")
		}
		if cause := context.Cause(l.Context()); !strings.Contains(cause.Error(), "unreachable") {
			t.Fatalf("cause %v, want reason unreachable", cause)
		}
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("unlock: %v", err)
		}
	})
}
