package dlockfake_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockfake"
	"github.com/dlockgo/dlock/observe"
)

// world is a Service on a virtual clock and a context for its calls.
type world struct {
	t   *testing.T
	svc *dlockfake.Service
	ctx context.Context
}

func newWorld(t *testing.T) *world {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return &world{t, dlockfake.New(), ctx}
}

// client returns a new Client, closed at the test's end.
func (w *world) client(cfg ...dlockfake.Config) *dlockfake.Client {
	w.t.Helper()
	c, err := w.svc.NewClient(cfg...)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { c.Close() })
	return c
}

func (w *world) acquire(l dlock.Locker, opts ...dlock.Option) *dlock.Lease {
	w.t.Helper()
	lease, err := l.Acquire(w.ctx, opts...)
	if err != nil {
		w.t.Fatalf("acquire %s: %v", l.Name(), err)
	}
	return lease
}

// busy checks that l is held elsewhere: a try gets ErrNotAcquired.
func (w *world) busy(l dlock.Locker) {
	w.t.Helper()
	if lease, err := l.Acquire(w.ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		w.t.Fatalf("a try of %s: %v %v, want ErrNotAcquired", l.Name(), lease, err)
	}
}

// result is the outcome of an Acquire call run in its own goroutine.
type result struct {
	l   *dlock.Lease
	err error
}

// goAcquire starts an Acquire of l in its own goroutine.
func (w *world) goAcquire(l dlock.Locker, opts ...dlock.Option) <-chan result {
	ch := make(chan result, 1)
	go func() {
		lease, err := l.Acquire(w.ctx, opts...)
		ch <- result{lease, err}
	}()
	return ch
}

// await waits for the result of a goAcquire.
func (w *world) await(ch <-chan result) result {
	w.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-w.ctx.Done():
		w.t.Fatal("the Acquire call never returned")
	}
	panic("unreachable")
}

// waiters waits until n Acquire calls of name wait in the Service.
func (w *world) waiters(name string, n int) {
	w.t.Helper()
	if err := w.svc.AwaitWaiters(w.ctx, name, n); err != nil {
		w.t.Fatal(err)
	}
}

// held checks that l is held: Err nil, Done open.
func held(t *testing.T, l *dlock.Lease) {
	t.Helper()
	select {
	case <-l.Done():
		t.Fatalf("lost: %v", l.Err())
	default:
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err: %v", err)
	}
}

// lost checks that l was lost for reason, and its holder told: Done
// closed, Err and the Context's cause wrap ErrLockLost and name reason.
func lost(t *testing.T, l *dlock.Lease, reason observe.LostReason) {
	t.Helper()
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed")
	}
	err := l.Err()
	if !errors.Is(err, dlock.ErrLockLost) || !strings.Contains(err.Error(), string(reason)) {
		t.Fatalf("Err: %v, want ErrLockLost (%s)", err, reason)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, dlock.ErrLockLost) {
		t.Fatalf("Context's cause: %v, want ErrLockLost", cause)
	}
}

// events returns the record's events of op on name.
func events(svc *dlockfake.Service, op dlockfake.Op, name string) []dlockfake.Event {
	var out []dlockfake.Event
	for _, e := range svc.Record() {
		if e.Op == op && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}
