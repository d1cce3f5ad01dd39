package zklock

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

// waiting starts l.Acquire in the background (no wait bound) and waits
// until its node is in name's directory of family, which then has n
// nodes; the returned func waits for the grant, unlocks it and reports
// its error.
func waiting(t *testing.T, ctx context.Context, admin *Client, family, name string, n int, l dlock.Locker) func() error {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		lease, err := l.Acquire(ctx)
		if err == nil {
			err = lease.Unlock(ctx)
		}
		got <- err
	}()
	waitFor(t, func() bool { return len(members(t, admin, family, name)) == n })
	return func() error { return <-got }
}

// checkHolder checks the metadata Inspect shows of a holder or waiter of
// client c (its label is label), acquired at or after since.
func checkMeta(t *testing.T, what, host string, pid int, label string, at time.Time, since time.Time) {
	t.Helper()
	wantHost, _ := os.Hostname()
	if host != wantHost || pid != os.Getpid() || label != "" && label != "test-label" {
		t.Errorf("%s: host %q pid %d label %q, want %q %d", what, host, pid, label, wantHost, os.Getpid())
	}
	if at.Before(since.Add(-time.Second)) || at.After(time.Now().Add(time.Second)) {
		t.Errorf("%s: since %v, want after %v", what, at, since)
	}
}

// TestInspect: Inspect's answer for every shape, held and waited for, read
// by a client that holds nothing.
func TestInspect(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	const timeout = 3 * time.Second
	a := dial(t, timeout, Config{Label: "test-label"})
	b := dial(t, timeout)
	admin := dial(t, timeout)
	start := time.Now()

	t.Run("Free", func(t *testing.T) {
		n := lockName(t)
		info, err := admin.Inspect(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != n || info.Shape != "" || info.Held || len(info.Holders) != 0 || len(info.Queue) != 0 || info.TTL >= 0 || info.LastFence != 0 {
			t.Fatalf("a name never used: %+v", info)
		}
		l, err := a.Mutex(n).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		info, err = admin.Inspect(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if info.Shape != "" || info.Held || info.TTL >= 0 || info.LastFence != l.Token() {
			t.Fatalf("released (token %d): %+v", l.Token(), info)
		}
	})

	t.Run("Mutex", func(t *testing.T) {
		n := lockName(t)
		l, err := a.Mutex(n).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done := waiting(t, ctx, admin, familyLock, n, 2, b.Mutex(n))
		info, err := admin.Inspect(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if info.Shape != "mutex" || !info.Held || len(info.Holders) != 1 || len(info.Queue) != 1 || info.TTL != timeout || info.LastFence != l.Token() {
			t.Fatalf("%+v", info)
		}
		h, w := info.Holders[0], info.Queue[0]
		if h.ID != seam.ShortID(l.ID()) || h.Fence != l.Token() || h.Count != 1 || h.Mode != "" || h.TTL != timeout || h.Label != "test-label" {
			t.Errorf("holder %+v (lease %s, token %d)", h, l.ID(), l.Token())
		}
		checkMeta(t, "holder", h.Host, h.PID, h.Label, h.Since, start)
		if w.ID == h.ID || w.Mode != "" || w.Deadline >= 0 || w.Label != "" {
			t.Errorf("waiter %+v", w)
		}
		checkMeta(t, "waiter", w.Host, w.PID, w.Label, w.Since, start)
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := done(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("LockFixedLease", func(t *testing.T) {
		n := lockName(t)
		l, err := a.Lock(n).Acquire(ctx, dlock.LeaseTime(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		again, err := a.Lock(n).Acquire(l.Context())
		if err != nil {
			t.Fatal(err)
		}
		info, err := admin.Inspect(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if info.Shape != "lock" || len(info.Holders) != 1 || info.TTL != 2*time.Second || len(info.Queue) != 0 {
			t.Fatalf("%+v", info)
		}
		if h := info.Holders[0]; h.Count != 1 || h.Fence != l.Token() || h.ID != seam.ShortID(again.ID()) {
			t.Errorf("holder %+v", h)
		}
		again.Unlock(ctx)
		l.Unlock(ctx)
	})

	t.Run("RWLock", func(t *testing.T) {
		n := lockName(t)
		r1, err := a.RWLock(n).ReadLock().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := b.RWLock(n).ReadLock().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w := waiting(t, ctx, admin, familyLock, n, 3, b.RWLock(n).WriteLock())
		r3 := waiting(t, ctx, admin, familyLock, n, 4, a.RWLock(n).ReadLock()) // behind the writer
		info, err := admin.Inspect(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if info.Shape != "rw" || !info.Held || len(info.Holders) != 2 || len(info.Queue) != 2 || info.TTL >= 0 {
			t.Fatalf("%+v", info)
		}
		for i, l := range []*dlock.Lease{r1, r2} {
			if h := info.Holders[i]; h.Mode != "read" || h.Fence != l.Token() || h.ID != seam.ShortID(l.ID()) || h.TTL != timeout {
				t.Errorf("reader %d: %+v", i, h)
			}
		}
		if info.LastFence != r2.Token() {
			t.Errorf("LastFence %d, want the last reader's %d", info.LastFence, r2.Token())
		}
		if info.Queue[0].Mode != "write" || info.Queue[1].Mode != "read" {
			t.Errorf("queue %+v, want the writer then the reader", info.Queue)
		}
		r1.Unlock(ctx)
		r2.Unlock(ctx)
		if err := w(); err != nil {
			t.Fatal(err)
		}
		if err := r3(); err != nil {
			t.Fatal(err)
		}

		// A writer reading under its own write hold: both are holders.
		wl, err := a.RWLock(n).WriteLock().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rl, err := a.RWLock(n).ReadLock().Acquire(wl.Context(), dlock.Wait(0))
		if err != nil {
			t.Fatal(err)
		}
		info, err = admin.Inspect(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if len(info.Holders) != 2 || info.Holders[0].Mode != "write" || info.Holders[1].Mode != "read" || info.TTL != timeout || len(info.Queue) != 0 {
			t.Fatalf("write and own read: %+v", info)
		}
		rl.Unlock(ctx)
		wl.Unlock(ctx)
	})

	t.Run("Semaphore", func(t *testing.T) {
		n := lockName(t)
		var held []*dlock.Lease
		for _, c := range []*Client{a, b} {
			l, err := c.Semaphore(n, 2).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
		done := waiting(t, ctx, admin, familySemaphore, n, 3, a.Semaphore(n, 2))
		info, err := admin.Inspect(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if info.Shape != "semaphore" || info.Permits != 2 || len(info.Holders) != 2 || len(info.Queue) != 1 || info.TTL >= 0 || info.LastFence != held[1].Token() {
			t.Fatalf("%+v", info)
		}
		for i, l := range held {
			if h := info.Holders[i]; h.ID != seam.ShortID(l.ID()) || h.Fence != l.Token() || h.TTL != timeout || h.Mode != "" {
				t.Errorf("permit %d: %+v", i, h)
			}
		}
		for _, l := range held {
			l.Unlock(ctx)
		}
		if err := done(); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("MultiLock", func(t *testing.T) {
		x, y := lockName(t)+"x", lockName(t)+"y"
		l, err := a.MultiLock(y, x).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{x, y} {
			info, err := admin.Inspect(ctx, n)
			if err != nil {
				t.Fatal(err)
			}
			if info.Shape != "multi" || len(info.Holders) != 1 || info.Holders[0].Fence != l.Token() || info.Holders[0].ID != seam.ShortID(l.ID()) {
				t.Fatalf("%s: %+v", n, info)
			}
		}
		l.Unlock(ctx)
	})

	t.Run("BadInput", func(t *testing.T) {
		var nilCtx context.Context
		if _, err := admin.Inspect(nilCtx, "x"); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("nil ctx: %v", err)
		}
		for _, n := range []string{"", strings.Repeat("x", seam.MaxNameLen+1)} {
			if _, err := admin.Inspect(ctx, n); !errors.Is(err, dlock.ErrInvalidName) {
				t.Errorf("name of %d bytes: %v", len(n), err)
			}
		}
		closed := dial(t, timeout)
		closed.Close()
		if _, err := closed.Inspect(ctx, "x"); !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("closed client: %v", err)
		}
	})
}
