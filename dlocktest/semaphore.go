package dlocktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

func (s *suite) semaphore(t *testing.T) {
	a, b := s.b.NewClient(t), s.b.NewClient(t)
	if a.Semaphore == nil {
		t.Skip("the backend has no semaphore")
	}
	n := name(t)
	ctx := testCtx(t, 30*time.Second)
	p1 := acquire(t, ctx, a.Semaphore(n, 2), dlock.Wait(0))
	p2 := acquire(t, ctx, b.Semaphore(n, 2), dlock.Wait(0))
	if _, err := a.Semaphore(n, 2).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a third permit of two: %v", err)
	}
	unlock(t, p1)
	p3 := acquire(t, ctx, a.Semaphore(n, 2), dlock.Wait(5*time.Second))
	unlock(t, p2)
	unlock(t, p3)

	var inside, most int
	var mu sync.Mutex
	hammer(t, ctx, 6, 4, func(i int) dlock.Locker { return []Client{a, b}[i%2].Semaphore(n, 2) }, func(int, *dlock.Lease) {
		mu.Lock()
		inside++
		most = max(most, inside)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		inside--
		mu.Unlock()
	})
	if most > 2 {
		t.Fatalf("%d holders of a 2-permit semaphore at once", most)
	}
}

// semaphoreClients returns n clients, skipping t if the backend has no
// semaphore.
func (s *suite) semaphoreClients(t *testing.T, n int) []Client {
	t.Helper()
	cs := make([]Client, n)
	for i := range cs {
		cs[i] = s.b.NewClient(t)
		if cs[i].Semaphore == nil {
			t.Skip("the backend has no semaphore")
		}
	}
	return cs
}

// inspectPermits checks, if the client can inspect, that the store keeps
// want permits for name with held of them taken.
func inspectPermits(t *testing.T, ctx context.Context, c Client, name string, want, held int) {
	t.Helper()
	if c.Inspect == nil {
		return
	}
	info, err := c.Inspect(ctx, name)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	if info.Shape != "semaphore" || info.Permits != want || len(info.Holders) != held || info.Held != (held > 0) {
		t.Fatalf("Inspect: shape %q, %d permits, %d held (held %v), want semaphore, %d permits, %d held",
			info.Shape, info.Permits, len(info.Holders), info.Held, want, held)
	}
}

// permitsInTheStore: the first acquisition sets the count; a Semaphore of
// another count is refused (ErrInvalidArgument) at once, whether it tries
// or would wait, and takes nothing; the count outlives its permits.
func (s *suite) permitsInTheStore(t *testing.T) {
	cs := s.semaphoreClients(t, 2)
	a, b := cs[0], cs[1]
	n := name(t)
	ctx := testCtx(t, 30*time.Second)
	p := acquire(t, ctx, a.Semaphore(n, 1), dlock.Wait(0))
	inspectPermits(t, ctx, a, n, 1, 1)
	for _, opt := range []dlock.Option{dlock.Wait(0), dlock.Wait(10 * time.Second)} {
		start := time.Now()
		if _, err := b.Semaphore(n, 3).Acquire(ctx, opt); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("a Semaphore of 3 where the store keeps 1: %v, want ErrInvalidArgument", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("a Semaphore of another count was refused after %v, want at once", d)
		}
	}
	// Nothing was taken: the one permit is the first holder's.
	inspectPermits(t, ctx, a, n, 1, 1)
	if _, err := b.Semaphore(n, 1).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a second permit of 1: %v, want ErrNotAcquired", err)
	}
	unlock(t, p)
	if _, err := b.Semaphore(n, 2).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("a Semaphore of 2 once the permits of 1 are released: %v, want ErrInvalidArgument (the count stays)", err)
	}
	inspectPermits(t, ctx, a, n, 1, 0)
	q := acquire(t, ctx, b.Semaphore(n, 1), dlock.Wait(5*time.Second))
	unlock(t, q)
}

// setPermits: SetPermits raises the count so that its own Semaphore's
// waiter gets in; a waiter whose Semaphore has the old count is refused
// when the count changes; lowering keeps the permits held beyond the new
// count until they are released; bad input changes nothing.
func (s *suite) setPermits(t *testing.T) {
	cs := s.semaphoreClients(t, 3)
	a, b, c := cs[0], cs[1], cs[2]
	n := name(t)
	ctx := testCtx(t, 60*time.Second)
	wait := func(l dlock.Locker) <-chan *dlock.Lease {
		got := make(chan *dlock.Lease, 1)
		go func() {
			lease, err := l.Acquire(ctx, dlock.Wait(30*time.Second))
			if err != nil {
				lease = nil
			}
			got <- lease
		}()
		return got
	}
	p1 := acquire(t, ctx, a.Semaphore(n, 1), dlock.Wait(0))
	w := b.Semaphore(n, 1)
	waiter := wait(w)
	time.Sleep(300 * time.Millisecond) // the waiter waits
	if err := w.SetPermits(ctx, 2); err != nil {
		t.Fatalf("SetPermits(2): %v", err)
	}
	var p2 *dlock.Lease
	select {
	case p2 = <-waiter:
		if p2 == nil {
			t.Fatal("the waiter of the Semaphore whose SetPermits raised the count failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SetPermits(2) did not let the waiter in")
	}
	inspectPermits(t, ctx, a, n, 2, 2)

	// A waiter whose Semaphore has the old count: refused when the count
	// changes again (woken, it finds another count).
	stale := make(chan error, 1)
	go func() {
		l, err := c.Semaphore(n, 2).Acquire(ctx, dlock.Wait(30*time.Second))
		if err == nil {
			_ = l.Unlock(ctx)
		}
		stale <- err
	}()
	time.Sleep(300 * time.Millisecond) // it waits: both permits are held
	if err := a.Semaphore(n, 2).SetPermits(ctx, 1); err != nil {
		t.Fatalf("SetPermits(1): %v", err)
	}
	select {
	case err := <-stale:
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("a waiter with the old count: %v, want ErrInvalidArgument", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiter with the old count was not refused when SetPermits changed it")
	}

	// Lowered to 1 with 2 held: both stay held; nobody gets in until the
	// permits held fall below the count.
	for _, l := range []*dlock.Lease{p1, p2} {
		if err := l.Verify(ctx); err != nil {
			t.Fatalf("a permit held beyond the lowered count: %v", err)
		}
	}
	one := c.Semaphore(n, 1)
	if _, err := one.Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a permit of 1 while 2 are held: %v, want ErrNotAcquired", err)
	}
	unlock(t, p1)
	if _, err := one.Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a permit of 1 while 1 is held: %v, want ErrNotAcquired", err)
	}
	inspectPermits(t, ctx, a, n, 1, 1)
	next := wait(one)
	time.Sleep(100 * time.Millisecond)
	unlock(t, p2)
	select {
	case l := <-next:
		if l == nil {
			t.Fatal("the waiter for the one permit failed")
		}
		unlock(t, l)
	case <-time.After(10 * time.Second):
		t.Fatal("the permit freed under the lowered count was not granted")
	}

	// Bad input: refused, the count unchanged.
	for _, k := range []int{0, -1} {
		if err := one.SetPermits(ctx, k); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("SetPermits(%d): %v, want ErrInvalidArgument", k, err)
		}
	}
	if err := a.Semaphore("", 1).SetPermits(ctx, 1); !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf("SetPermits of an empty name: %v, want ErrInvalidName", err)
	}
	inspectPermits(t, ctx, a, n, 1, 0)
	l := acquire(t, ctx, one, dlock.Wait(5*time.Second))
	unlock(t, l)
}
