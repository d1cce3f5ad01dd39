package etcdlock

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// inspectEventually calls Inspect until ok accepts the answer, failing t
// after 10 s with the last one.
func inspectEventually(t *testing.T, c *Client, name, what string, ok func(dlock.Info) bool) dlock.Info {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Inspect(context.Background(), name)
		if err != nil {
			t.Fatal(err)
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

// checkHolder checks what every holder says of the process that holds.
func checkHolder(t *testing.T, h dlock.Holder, label string, since time.Time, l *dlock.Lease, ttl time.Duration) {
	t.Helper()
	host, _ := os.Hostname()
	switch {
	case len(h.ID) != 8:
		t.Errorf("holder ID %q: want 8 characters", h.ID)
	case h.Host != strings.ReplaceAll(host, "|", "_") || h.PID != os.Getpid() || h.Label != label:
		t.Errorf("holder %s/%d/%q, want %s/%d/%q", h.Host, h.PID, h.Label, host, os.Getpid(), label)
	case h.Since.Before(since.Truncate(time.Millisecond)) || h.Since.After(time.Now()):
		t.Errorf("holder since %v, want between %v and now", h.Since, since)
	case h.Count != 1 || h.Fence != l.Token():
		t.Errorf("holder count %d fence %d, want 1 and %d", h.Count, h.Fence, l.Token())
	case h.TTL <= 0 || h.TTL > ttl:
		t.Errorf("holder TTL %v, want in (0, %v]", h.TTL, ttl)
	}
}

func TestInspectBadName(t *testing.T) {
	c := newClient(t)
	if _, err := c.Inspect(context.Background(), ""); !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf("Inspect(\"\"): %v, want ErrInvalidName", err)
	}
}

// Mutex and Lock: the oldest key holds, the others wait in arrival order;
// free before and after.
func TestInspectExclusive(t *testing.T) {
	for _, kind := range []string{"mutex", "lock"} {
		t.Run(kind, func(t *testing.T) {
			a := newClient(t, Config{Label: "svc-a"})
			b := newClient(t, Config{Label: "svc-b", TTL: 5 * time.Second})
			ctx := testCtx(t, 30*time.Second)
			n := lockName(t)
			get := func(c *Client) dlock.Locker {
				if kind == "mutex" {
					return c.Mutex(n)
				}
				return c.Lock(n)
			}
			info, err := a.Inspect(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if info.Shape != "" || info.Held || len(info.Holders) != 0 || len(info.Queue) != 0 || info.TTL >= 0 || info.LastFence != 0 {
				t.Fatalf("a free lock: %+v", info)
			}
			before := time.Now()
			l, err := get(a).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Two waiters: one on its session, one with a queue timeout of
			// its own (3 s, shorter than b's TTL of 5 s).
			const queueTimeout = 3 * time.Second
			done := make(chan struct{}, 2)
			var asked time.Time // when the second waiter was started: its queue lease ends 3 s after, or later
			for _, opts := range [][]dlock.Option{nil, {dlock.QueueTimeout(queueTimeout)}} {
				wctx, cancel := context.WithCancel(ctx)
				defer cancel()
				asked = time.Now()
				go func() {
					// A waiter granted holds until b is closed, so that the
					// test sees the first hold and the second waiter
					// behind it (released at once, the first hold could
					// pass between two Inspects).
					if w, err := get(b).Acquire(wctx, opts...); err == nil {
						select {
						case <-w.Context().Done():
						case <-wctx.Done():
						}
						_ = w.Unlock(ctx)
					}
					done <- struct{}{}
				}()
				inspectEventually(t, a, n, "a waiter queued", func(i dlock.Info) bool { return len(i.Queue) == 1+len(opts) })
			}
			info = inspectEventually(t, a, n, "the second waiter on its queue lease", func(i dlock.Info) bool {
				return len(i.Queue) == 2 && i.Queue[1].Deadline > 0
			})
			if info.Shape != kind || !info.Held || len(info.Holders) != 1 || info.LastFence != l.Token() {
				t.Fatalf("held: %+v", info)
			}
			h := info.Holders[0]
			checkHolder(t, h, "svc-a", before, l, a.TTL())
			if kind == "lock" && h.ID != seam.ShortID(seam.CarriedOwner(l.Context())) {
				t.Errorf("Lock holder ID %q, want its owner's first 8 characters", h.ID)
			}
			if h.Mode != "" || info.TTL != h.TTL {
				t.Errorf("holder mode %q, lock TTL %v (holder's %v)", h.Mode, info.TTL, h.TTL)
			}
			for i, w := range info.Queue {
				if len(w.ID) != 8 || w.Label != "svc-b" || w.PID != os.Getpid() || w.Since.Before(before.Truncate(time.Millisecond)) || w.Mode != "" {
					t.Errorf("waiter %d: %+v", i, w)
				}
			}
			if d := info.Queue[0].Deadline; d >= 0 {
				t.Errorf("a waiter on its session: Deadline %v, want < 0", d)
			}
			if d := info.Queue[1].Deadline; d <= 0 || d > queueTimeout {
				t.Errorf("a waiter with QueueTimeout(%v): Deadline %v, want in (0, %v]", queueTimeout, d, queueTimeout)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			// The first waiter holds now, with its own lease.
			info = inspectEventually(t, a, n, "the first waiter granted", func(i dlock.Info) bool {
				return len(i.Holders) == 1 && i.Holders[0].Label == "svc-b" && i.Holders[0].Fence > l.Token()
			})
			// The second waiter is still queued, unless its queue timeout
			// ended first (a loaded machine: it then gave up, as it must).
			if len(info.Queue) != 1 && time.Since(asked) < queueTimeout {
				t.Errorf("after the hand-off: queue %+v, want the second waiter", info.Queue)
			}
			b.Close()
			<-done
			<-done
			inspectEventually(t, a, n, "free again", func(i dlock.Info) bool { return i.Shape == "" && !i.Held && len(i.Queue) == 0 })
		})
	}
}

// RWLock: readers hold together with their own TTLs, a writer waits and
// holds back the reader after it; then the writer holds.
func TestInspectRWLock(t *testing.T) {
	a := newClient(t, Config{Label: "r"})
	b := newClient(t, Config{Label: "w"})
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	before := time.Now()
	r1, err := a.RWLock(n).ReadLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.RWLock(n).ReadLock().Acquire(ctx, dlock.LeaseTime(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		w, err := b.RWLock(n).WriteLock().Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	inspectEventually(t, a, n, "the writer queued", func(i dlock.Info) bool { return len(i.Queue) == 1 })
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = a.RWLock(n).ReadLock().Acquire(rctx) }()
	info := inspectEventually(t, a, n, "a reader behind the writer", func(i dlock.Info) bool { return len(i.Queue) == 2 })
	if info.Shape != "rw" || !info.Held || len(info.Holders) != 2 || info.TTL >= 0 || info.LastFence != r2.Token() {
		t.Fatalf("read-held: %+v", info)
	}
	for i, l := range []*dlock.Lease{r1, r2} {
		h := info.Holders[i]
		checkHolder(t, h, "r", before, l, []time.Duration{a.TTL(), 30 * time.Second}[i])
		if h.Mode != "read" {
			t.Errorf("reader %d: mode %q", i, h.Mode)
		}
	}
	if h := info.Holders[1]; h.TTL <= a.TTL() {
		t.Errorf("a reader with LeaseTime(30s): TTL %v, want its own lease's", h.TTL)
	}
	if q := info.Queue; q[0].Mode != "write" || q[0].Label != "w" || q[1].Mode != "read" || q[1].Label != "r" {
		t.Errorf("queue %+v, want the writer then the reader", q)
	}
	cancel()
	for _, l := range []*dlock.Lease{r1, r2} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	w := <-got
	if w == nil {
		return
	}
	info = inspectEventually(t, a, n, "the writer holds", func(i dlock.Info) bool { return len(i.Holders) == 1 && len(i.Queue) == 0 })
	if h := info.Holders[0]; h.Mode != "write" || h.Fence != w.Token() || h.Label != "w" || info.TTL != h.TTL || h.TTL <= 0 {
		t.Errorf("write-held: %+v", info)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Semaphore: Permits holders and the count, each with its own TTL; a
// waiter beyond them.
func TestInspectSemaphore(t *testing.T) {
	a := newClient(t, Config{Label: "p"})
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	before := time.Now()
	var ps []*dlock.Lease
	for range 2 {
		l, err := a.Semaphore(n, 2).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, l)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = a.Semaphore(n, 2).Acquire(wctx) }()
	info := inspectEventually(t, a, n, "a waiter for a permit", func(i dlock.Info) bool { return len(i.Queue) == 1 })
	if info.Shape != "semaphore" || info.Permits != 2 || len(info.Holders) != 2 || !info.Held || info.TTL >= 0 || info.LastFence != ps[1].Token() {
		t.Fatalf("semaphore: %+v", info)
	}
	for i, l := range ps {
		checkHolder(t, info.Holders[i], "p", before, l, a.TTL())
		if info.Holders[i].ID == info.Holders[1-i].ID {
			t.Errorf("two permits with one ID %q", info.Holders[i].ID)
		}
	}
	cancel()
	for _, l := range ps {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Free again; the count stays in etcd.
	inspectEventually(t, a, n, "free again", func(i dlock.Info) bool {
		return i.Shape == "semaphore" && !i.Held && len(i.Holders) == 0 && len(i.Queue) == 0 && i.Permits == 2
	})
}

// A MultiLock's members are Locks: each name shows the MultiLock's grant.
func TestInspectMultiLock(t *testing.T) {
	a := newClient(t, Config{Label: "m"})
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	before := time.Now()
	l, err := a.MultiLock(n+".y", n+".x").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{n + ".x", n + ".y"} {
		info, err := a.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Shape != "lock" || len(info.Holders) != 1 {
			t.Fatalf("%s: %+v", name, info)
		}
		checkHolder(t, info.Holders[0], "m", before, l, a.TTL())
		if info.Holders[0].ID != seam.ShortID(seam.CarriedOwner(l.Context())) {
			t.Errorf("%s: holder ID %q, want the MultiLock's owner's", name, info.Holders[0].ID)
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
