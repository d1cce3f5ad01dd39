package dlocktest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/leakcheck"
	"github.com/dlockgo/dlock/seam"
)

// closeSlack is what the Close tests allow on top of seam.CloseTimeout: a
// round trip, and goroutines that run late on a loaded machine.
const closeSlack = time.Second

// closeEndsWaiter: closing a client ends its Acquire calls that wait for a
// lock with an error wrapping ErrClosed at once, not when their ctx ends
// or the lock frees.
func (s *suite) closeEndsWaiter(t *testing.T, sh shape) {
	c := s.b.NewClient(t)
	get := sh.get(c)
	if get == nil {
		t.Skipf("the backend has no %s", sh.name)
	}
	holder := s.lockers(t, sh, 1)[0]
	n := name(t)
	ctx := testCtx(t, 60*time.Second)
	held := acquire(t, ctx, holder(n))
	defer unlock(t, held)
	done := make(chan error, 1)
	go func() {
		l, err := get(n).Acquire(ctx)
		if err == nil {
			_ = l.Unlock(ctx)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("the waiter returned while the lock was held: %v", err)
	case <-time.After(300 * time.Millisecond): // queued behind held
	}
	closed := time.Now()
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("a waiter of a closed client: %v, want ErrClosed", err)
		}
	case <-time.After(seam.CloseTimeout + closeSlack - time.Since(closed)):
		t.Fatalf("a waiter of a closed client still waits %v after Close", time.Since(closed))
	}
}

// closeBounded: a client cut off from the store (Backend.NewCutClient),
// with many leases (kept by renewals, fixed, re-entered) and a waiter,
// closes within seam.CloseTimeout plus a round trip: every lease is lost
// (Done closed, Err wraps ErrLockLost) and the waiter ends with ErrClosed.
func (s *suite) closeBounded(t *testing.T) {
	if s.b.NewCutClient == nil {
		t.Skip("the backend cannot cut a client off")
	}
	c, cut := s.b.NewCutClient(t)
	other := s.b.NewClient(t)
	n := name(t)
	ctx := testCtx(t, 60*time.Second)
	var leases []*dlock.Lease
	for i := range 40 {
		var opts []dlock.Option
		if i%2 == 1 && s.b.Lease > 0 {
			opts = append(opts, dlock.LeaseTime(time.Minute))
		}
		leases = append(leases, acquire(t, ctx, c.Mutex(fmt.Sprintf("%s.%d", n, i)), opts...))
	}
	if c.Lock != nil {
		outer := acquire(t, ctx, c.Lock(n+".lock"))
		inner := acquire(t, outer.Context(), c.Lock(n+".lock"), dlock.Wait(0))
		leases = append(leases, outer, inner)
	}
	held := acquire(t, ctx, other.Mutex(n+".held"))
	defer unlock(t, held)
	waited := make(chan error, 1)
	go func() {
		_, err := c.Mutex(n + ".held").Acquire(ctx)
		waited <- err
	}()
	time.Sleep(300 * time.Millisecond) // the waiter queues
	cut()
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Logf("Close with the store cut off: %v", err)
	}
	took := time.Since(start)
	if bound := seam.CloseTimeout + closeSlack; took > bound {
		t.Fatalf("Close took %v with the store cut off and %d leases, want at most %v", took, len(leases), bound)
	}
	for i, l := range leases {
		select {
		case <-l.Done():
		default:
			t.Fatalf("lease %d not lost when Close returned", i)
		}
		if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("lease %d after Close: %v, want ErrLockLost", i, err)
		}
	}
	select {
	case err := <-waited:
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("the waiter of the closed client: %v, want ErrClosed", err)
		}
	case <-time.After(seam.CloseTimeout + closeSlack - time.Since(start)):
		t.Fatalf("the waiter of the closed client still waits %v after Close began", time.Since(start))
	}
	t.Logf("Close took %v with the store cut off and %d leases", took.Round(time.Millisecond), len(leases))
}

// noGoroutineAfterClose: a client that held, waited, re-entered, lost a
// lease at MaxHold and unlocked a lost lease leaves no goroutine of the
// backend (nor an Acquire of its caller) running once Close has returned
// (a moment is allowed for goroutines that have signalled their end to
// exit).
func (s *suite) noGoroutineAfterClose(t *testing.T) {
	before := leakcheck.Take()
	c, other := s.b.NewClient(t), s.b.NewClient(t)
	n := name(t)
	ctx := testCtx(t, 60*time.Second)
	acquire(t, ctx, c.Mutex(n+".renewed")) // held until Close
	if c.Lock != nil {
		outer := acquire(t, ctx, c.Lock(n+".lock"))
		inner := acquire(t, outer.Context(), c.Lock(n+".lock"), dlock.Wait(0))
		unlock(t, inner)
	}
	capped := acquire(t, ctx, c.Mutex(n+".capped"), dlock.MaxHold(s.b.Renewal/2))
	held := acquire(t, ctx, other.Mutex(n+".held"))
	waited := make(chan error, 1)
	go func() {
		_, err := c.Mutex(n + ".held").Acquire(ctx)
		waited <- err
	}()
	cancelled, cancel := context.WithCancel(ctx)
	go func() {
		time.Sleep(100 * time.Millisecond)
		cancel()
	}()
	if _, err := c.Mutex(n + ".held").Acquire(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled waiter: %v", err)
	}
	select {
	case <-capped.Done():
	case <-time.After(s.b.Renewal + 10*time.Second):
		t.Fatal("a lease with MaxHold not lost")
	}
	if err := capped.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after MaxHold: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-waited; !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("the waiter of the closed client: %v, want ErrClosed", err)
	}
	unlock(t, held)
	if err := other.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// The suite's own goroutines are not the backend's; test harnesses
	// (internal/...) are not either.
	backend := func(pkg string) bool {
		return strings.HasPrefix(pkg, "github.com/dlockgo/dlock") &&
			!strings.HasPrefix(pkg, "github.com/dlockgo/dlock/dlocktest") &&
			!strings.HasPrefix(pkg, "github.com/dlockgo/dlock/internal/")
	}
	if err := before.Since(500*time.Millisecond, backend); err != nil {
		t.Fatal(err)
	}
}
