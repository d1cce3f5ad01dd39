package dlocktest

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

// The Inspect tests read locks of every shape held, waited for and free,
// and check the meaning every backend gives dlock.Info, allowing what
// seam documents differs by store: TTL is a countdown on Redis and a
// bound on a session store (how long a hold outlives its holder's last
// sign of life), Count is 1 where the client counts re-entries, a
// waiter's Deadline is < 0 where its place lives as long as its session,
// and LastFence is 0 where the store keeps no counter.

// inspector returns c's Inspect, skipping t if it has none.
func inspector(t *testing.T, c Client) func(context.Context, string) (dlock.Info, error) {
	t.Helper()
	if c.Inspect == nil {
		t.Skip("the backend client has no Inspect")
	}
	return c.Inspect
}

// inspectUntil calls inspect until ok accepts the answer, failing t after
// 10 s with the last one.
func inspectUntil(t *testing.T, ctx context.Context, inspect func(context.Context, string) (dlock.Info, error), name, what string, ok func(dlock.Info) bool) dlock.Info {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := inspect(ctx, name)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if ok(info) {
			return info
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Inspect says %+v", what, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ttlBound is the longest TTL Inspect may report of a lease of the suite:
// a renewed one's or a fixed one's, with a second for stores that count
// TTLs in whole seconds (etcd).
func (s *suite) ttlBound() time.Duration { return max(s.b.Renewal, s.b.Lease) + time.Second }

// checkHolder checks what Inspect says of a holder l of this process.
func (s *suite) checkHolder(t *testing.T, h dlock.Holder, l *dlock.Lease, mode string) {
	t.Helper()
	host, _ := os.Hostname()
	switch {
	case h.ID == "" || len(h.ID) > 8:
		t.Errorf("holder ID %q: want 1 to 8 characters", h.ID)
	case h.PID != os.Getpid() || h.Host != strings.ReplaceAll(host, "|", "_"):
		t.Errorf("holder %s/%d, want this process %s/%d", h.Host, h.PID, host, os.Getpid())
	case h.Fence != l.Token():
		t.Errorf("holder fence %d, want the lease's token %d", h.Fence, l.Token())
	case h.Count < 1:
		t.Errorf("holder count %d, want at least 1", h.Count)
	case h.Mode != mode:
		t.Errorf("holder mode %q, want %q", h.Mode, mode)
	case h.TTL <= 0 || h.TTL > s.ttlBound():
		t.Errorf("holder TTL %v, want in (0, %v]", h.TTL, s.ttlBound())
	case h.Since.IsZero() || h.Since.After(time.Now().Add(time.Second)):
		t.Errorf("holder since %v", h.Since)
	}
}

// checkWaiter checks what Inspect says of a waiter of this process.
func checkWaiter(t *testing.T, w dlock.Waiter, mode string) {
	t.Helper()
	switch {
	case w.ID == "" || len(w.ID) > 8:
		t.Errorf("waiter ID %q: want 1 to 8 characters", w.ID)
	case w.PID != os.Getpid():
		t.Errorf("waiter pid %d, want %d", w.PID, os.Getpid())
	case w.Mode != mode:
		t.Errorf("waiter mode %q, want %q", w.Mode, mode)
	case w.Deadline == 0:
		t.Errorf("waiter deadline 0: want the time its place has left, or < 0 for as long as its session")
	}
}

// waitIn starts an acquisition of l that waits, and returns a function
// that cancels it and waits for it to end.
func waitIn(t *testing.T, ctx context.Context, l dlock.Locker) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if lease, err := l.Acquire(ctx); err == nil {
			_ = lease.Unlock(context.Background())
		}
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// inspectExclusive: a free name, then a Mutex and a Lock held and waited
// for, then free again.
func (s *suite) inspectExclusive(t *testing.T) {
	a, b := s.b.NewClient(t), s.b.NewClient(t)
	inspect := inspector(t, a)
	ctx := testCtx(t, 60*time.Second)
	fresh := name(t)
	info, err := inspect(ctx, fresh)
	if err != nil {
		t.Fatalf("Inspect of a free name: %v", err)
	}
	if info.Name != fresh || info.Held || len(info.Holders) != 0 || len(info.Queue) != 0 || info.Shape != "" || info.TTL >= 0 {
		t.Fatalf("a name never locked: %+v, want free, no shape, TTL < 0", info)
	}
	for _, tc := range []struct {
		shape  string
		shapes []string // what Inspect may call it
		get    func(c Client) func(string) dlock.Locker
	}{
		{"mutex", []string{"mutex"}, func(c Client) func(string) dlock.Locker { return c.Mutex }},
		{"lock", []string{"lock", "fair"}, func(c Client) func(string) dlock.Locker { return c.Lock }},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			if tc.get(a) == nil {
				t.Skipf("the backend has no %s", tc.shape)
			}
			n := name(t)
			l := acquire(t, ctx, tc.get(a)(n))
			info := inspectUntil(t, ctx, inspect, n, "held", func(i dlock.Info) bool { return i.Held })
			if !slices.Contains(tc.shapes, info.Shape) || len(info.Holders) != 1 || len(info.Queue) != 0 {
				t.Fatalf("a held %s: %+v", tc.shape, info)
			}
			s.checkHolder(t, info.Holders[0], l, "")
			if info.TTL <= 0 || info.TTL > s.ttlBound() {
				t.Errorf("the lock's TTL %v, want in (0, %v]", info.TTL, s.ttlBound())
			}
			if info.LastFence != 0 && info.LastFence < l.Token() {
				t.Errorf("last fence %d below the holder's token %d", info.LastFence, l.Token())
			}
			stop := waitIn(t, ctx, tc.get(b)(n))
			info = inspectUntil(t, ctx, inspect, n, "a waiter", func(i dlock.Info) bool { return len(i.Queue) == 1 })
			if len(info.Holders) != 1 || info.Holders[0].Fence != l.Token() {
				t.Fatalf("held and waited for: %+v", info)
			}
			checkWaiter(t, info.Queue[0], "")
			stop()
			unlock(t, l)
			info = inspectUntil(t, ctx, inspect, n, "free again", func(i dlock.Info) bool { return !i.Held && len(i.Queue) == 0 })
			if len(info.Holders) != 0 || (info.LastFence != 0 && info.LastFence < l.Token()) {
				t.Fatalf("free again: %+v", info)
			}
		})
	}
}

// inspectReadWrite: two readers hold, a writer waits behind them.
func (s *suite) inspectReadWrite(t *testing.T) {
	cs := s.rwClients(t, 3)
	a, b, c := cs[0], cs[1], cs[2]
	inspect := inspector(t, a)
	ctx := testCtx(t, 60*time.Second)
	n := name(t)
	r1 := acquire(t, ctx, a.Read(n))
	r2 := acquire(t, ctx, b.Read(n))
	info := inspectUntil(t, ctx, inspect, n, "two readers", func(i dlock.Info) bool { return len(i.Holders) == 2 })
	if info.Shape != "rw" || !info.Held || len(info.Queue) != 0 {
		t.Fatalf("two readers: %+v", info)
	}
	for _, l := range []*dlock.Lease{r1, r2} {
		var h *dlock.Holder
		for i := range info.Holders {
			if info.Holders[i].Fence == l.Token() {
				h = &info.Holders[i]
			}
		}
		if h == nil {
			t.Fatalf("no holder with the reader's token %d: %+v", l.Token(), info.Holders)
		}
		s.checkHolder(t, *h, l, "read")
	}
	stop := waitIn(t, ctx, c.Write(n))
	info = inspectUntil(t, ctx, inspect, n, "a waiting writer", func(i dlock.Info) bool { return len(i.Queue) == 1 })
	if len(info.Holders) != 2 {
		t.Fatalf("two readers and a writer waiting: %+v", info)
	}
	checkWaiter(t, info.Queue[0], "write")
	stop()
	unlock(t, r1)
	unlock(t, r2)
	inspectUntil(t, ctx, inspect, n, "free again", func(i dlock.Info) bool { return !i.Held && len(i.Holders) == 0 && len(i.Queue) == 0 })
}

// inspectSemaphore: the count, the permits held (each with its own TTL,
// the semaphore's TTL < 0), and the count kept once they are released.
func (s *suite) inspectSemaphore(t *testing.T) {
	a, b := s.b.NewClient(t), s.b.NewClient(t)
	inspect := inspector(t, a)
	if a.Semaphore == nil {
		t.Skip("the backend has no semaphore")
	}
	ctx := testCtx(t, 60*time.Second)
	n := name(t)
	p1 := acquire(t, ctx, a.Semaphore(n, 3))
	p2 := acquire(t, ctx, b.Semaphore(n, 3))
	info := inspectUntil(t, ctx, inspect, n, "two permits", func(i dlock.Info) bool { return len(i.Holders) == 2 })
	if info.Shape != "semaphore" || info.Permits != 3 || !info.Held || info.TTL >= 0 {
		t.Fatalf("two permits of 3: %+v, want shape semaphore, 3 permits, TTL < 0", info)
	}
	for _, l := range []*dlock.Lease{p1, p2} {
		var h *dlock.Holder
		for i := range info.Holders {
			if info.Holders[i].Fence == l.Token() {
				h = &info.Holders[i]
			}
		}
		if h == nil {
			t.Fatalf("no permit with the token %d: %+v", l.Token(), info.Holders)
		}
		s.checkHolder(t, *h, l, "")
	}
	unlock(t, p1)
	unlock(t, p2)
	info = inspectUntil(t, ctx, inspect, n, "free", func(i dlock.Info) bool { return !i.Held })
	if info.Shape != "semaphore" || info.Permits != 3 || len(info.Holders) != 0 {
		t.Fatalf("a free semaphore: %+v, want its count of 3 kept", info)
	}
}
