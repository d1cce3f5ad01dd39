package dlockfake_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockfake"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
)

// Each fault control has a test here, on a virtual clock: none sleeps, and
// each fails if its control does nothing.

// TestAdvance: a fixed lease is lost when Advance reaches its deadline (the
// lease less seam.Drift), not a millisecond before, and the Service frees
// it at the lease's end, after its holder was told; a renewed lease is
// renewed every TTL/3 and outlives an hour.
func TestAdvance(t *testing.T) {
	w := newWorld(t)
	a, b := w.client(), w.client()
	start := w.svc.Now()
	fixed := w.acquire(a.Mutex("fixed"), dlock.LeaseTime(10*time.Second))
	renewed := w.acquire(a.Mutex("renewed"))
	deadline := 10*time.Second - seam.Drift(10*time.Second)

	w.svc.Advance(deadline - time.Millisecond)
	held(t, fixed)
	w.svc.Advance(time.Millisecond)
	lost(t, fixed, observe.LostExpired)
	if d := w.svc.Now().Sub(start); d != deadline {
		t.Fatalf("the clock moved %v, want %v", d, deadline)
	}
	w.busy(b.Mutex("fixed")) // told before the Service lets anyone else in
	w.svc.Advance(10*time.Second - deadline)
	w.acquire(b.Mutex("fixed"), dlock.Wait(0))

	w.svc.Advance(time.Hour)
	held(t, renewed)
	w.busy(b.Mutex("renewed"))
	// Renewed at 10 s, 20 s, ... 3610 s.
	if n := len(events(w.svc, dlockfake.Renew, "renewed")); n != 361 {
		t.Fatalf("%d renewals in 3610 s with a 30 s TTL, want 361", n)
	}
}

// countLost is an Observer that counts the losses it hears of.
type countLost struct {
	observe.Nop
	mu      sync.Mutex
	reasons []observe.LostReason
}

func (o *countLost) ObserveLost(ev observe.LostEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reasons = append(o.reasons, ev.Reason)
}

// TestLose: the holder is told at once, with the reason (Done, Err, the
// Context's cause, OnLost, the Observer, the record), and the waiter behind
// it gets the lock; bad input changes nothing.
func TestLose(t *testing.T) {
	for _, reason := range []observe.LostReason{observe.LostExpired, observe.LostDeletedOrTaken, observe.LostUnreachable} {
		t.Run(string(reason), func(t *testing.T) {
			w := newWorld(t)
			obs := &countLost{}
			a, b := w.client(dlockfake.Config{Observer: obs}), w.client()
			told := make(chan struct{})
			l := w.acquire(a.Lock("x"), dlock.OnLost(func(*dlock.Lease) { close(told) }))
			next := w.goAcquire(b.Lock("x"), dlock.Wait(time.Minute))
			w.waiters("x", 1)
			if err := w.svc.Lose("x", reason); err != nil {
				t.Fatal(err)
			}
			lost(t, l, reason)
			<-told
			obs.mu.Lock()
			heard := obs.reasons
			obs.mu.Unlock()
			if len(heard) != 1 || heard[0] != reason {
				t.Fatalf("the Observer heard %v, want [%s]", heard, reason)
			}
			if ev := events(w.svc, dlockfake.Lost, "x"); len(ev) != 1 || ev[0].Reason != reason || ev[0].Token != l.Token() {
				t.Fatalf("recorded losses %v", ev)
			}
			r := w.await(next)
			if r.err != nil || r.l.Token() <= l.Token() {
				t.Fatalf("the waiter: %v (token %d after %d)", r.err, r.l.Token(), l.Token())
			}
			if err := l.Unlock(w.ctx); !errors.Is(err, dlock.ErrLockLost) {
				t.Fatalf("Unlock of the lost lease: %v, want ErrLockLost", err)
			}
		})
	}
	t.Run("BadInput", func(t *testing.T) {
		w := newWorld(t)
		l := w.acquire(w.client().Lock("x"))
		for _, tc := range []struct {
			name   string
			reason observe.LostReason
			want   error
		}{
			{"x", observe.LostMaxHold, dlock.ErrInvalidArgument},
			{"x", "", dlock.ErrInvalidArgument},
			{"", observe.LostExpired, dlock.ErrInvalidName},
			{"free", observe.LostExpired, dlock.ErrNotHeld},
		} {
			if err := w.svc.Lose(tc.name, tc.reason); !errors.Is(err, tc.want) {
				t.Errorf("Lose(%q, %q): %v, want %v", tc.name, tc.reason, err, tc.want)
			}
		}
		held(t, l)
		if err := l.Verify(w.ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestTake: another process takes a held lock: its holder is not told
// until its Verify (a fixed lease) or its next renewal; the lock is
// refused to everyone until released, then goes to the waiter queued
// meanwhile.
func TestTake(t *testing.T) {
	w := newWorld(t)
	a, b := w.client(), w.client()
	fixed := w.acquire(a.Mutex("fixed"), dlock.LeaseTime(time.Minute))
	renewed := w.acquire(a.Lock("renewed"))
	for _, n := range []string{"fixed", "renewed"} {
		if _, err := w.svc.Take(n); err != nil {
			t.Fatal(err)
		}
	}
	held(t, fixed)
	held(t, renewed)
	w.busy(b.Mutex("fixed"))
	if err := fixed.Verify(w.ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Verify of a taken lock: %v, want ErrLockLost", err)
	}
	lost(t, fixed, observe.LostDeletedOrTaken)
	w.svc.Advance(dlockfake.DefaultTTL/3 - time.Millisecond)
	held(t, renewed)
	w.svc.Advance(time.Millisecond) // the renewal finds it gone
	lost(t, renewed, observe.LostDeletedOrTaken)

	release, err := w.svc.Take("free")
	if err != nil {
		t.Fatal(err)
	}
	info, err := b.Inspect(w.ctx, "free")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Host != "elsewhere" || info.Holders[0].Fence <= renewed.Token() {
		t.Fatalf("Inspect of a lock taken by another process: %+v %v", info, err)
	}
	next := w.goAcquire(b.Lock("free"), dlock.Wait(time.Hour))
	w.waiters("free", 1)
	w.busy(a.Lock("free"))
	release()
	release() // idempotent
	if r := w.await(next); r.err != nil || r.l.Token() <= info.Holders[0].Fence {
		t.Fatalf("the waiter after the release: %v", r.err)
	}
	if _, err := w.svc.Take(""); !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf("Take of an empty name: %v, want ErrInvalidName", err)
	}
}

// TestFailRenewals: two failed renewals lose a renewed lease at its
// deadline (unreachable), and the Service lets the next holder in only
// after that; one failed renewal does not lose it.
func TestFailRenewals(t *testing.T) {
	w := newWorld(t)
	a, b := w.client(), w.client()
	two := w.acquire(a.Lock("two"))
	one := w.acquire(a.Lock("one"))
	if err := w.svc.FailRenewals("two", 2); err != nil {
		t.Fatal(err)
	}
	if err := w.svc.FailRenewals("one", 1); err != nil {
		t.Fatal(err)
	}
	deadline := dlockfake.DefaultTTL - seam.Drift(dlockfake.DefaultTTL)
	w.svc.Advance(deadline - time.Millisecond)
	held(t, two)
	w.svc.Advance(time.Millisecond)
	lost(t, two, observe.LostUnreachable)
	w.busy(b.Lock("two")) // the Service keeps the grant for its TTL
	w.svc.Advance(dlockfake.DefaultTTL - deadline)
	w.acquire(b.Lock("two"), dlock.Wait(0))
	failed := 0
	for _, e := range events(w.svc, dlockfake.Renew, "two") {
		if errors.Is(e.Err, dlockfake.ErrUnreachable) {
			failed++
		}
	}
	if failed != 2 {
		t.Fatalf("%d failed renewals recorded, want 2", failed)
	}
	w.svc.Advance(time.Hour)
	held(t, one)
	if err := w.svc.FailRenewals("one", -1); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("FailRenewals(-1): %v, want ErrInvalidArgument", err)
	}
}

// TestFailAcquires: the next n acquisitions fail with a store error and
// take nothing; the one after is granted.
func TestFailAcquires(t *testing.T) {
	w := newWorld(t)
	a, b := w.client(), w.client()
	if err := w.svc.FailAcquires("x", 2); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, err := a.Lock("x").Acquire(w.ctx, dlock.Wait(time.Minute))
		if !errors.Is(err, dlockfake.ErrUnreachable) || errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("a failed acquisition: %v, want ErrUnreachable", err)
		}
		if !strings.HasPrefix(err.Error(), `dlock: acquire lock "x": `) {
			t.Fatalf("error %q, want dlock's format", err)
		}
	}
	// A MultiLock over x fails no more: the count is used up.
	l := w.acquire(b.MultiLock("y", "x"), dlock.Wait(0))
	if err := l.Unlock(w.ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.svc.FailAcquires("x", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := b.MultiLock("x", "y").Acquire(w.ctx); !errors.Is(err, dlockfake.ErrUnreachable) {
		t.Fatalf("a MultiLock over a failing name: %v, want ErrUnreachable", err)
	}
	w.acquire(a.Mutex("x"), dlock.Wait(0))
}

// TestBlockAcquires: a blocked acquisition waits, without reaching the
// Service, until unblocked, until its Wait runs out, or until its ctx ends.
func TestBlockAcquires(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	unblock, err := w.svc.BlockAcquires("x")
	if err != nil {
		t.Fatal(err)
	}
	waiting := w.goAcquire(c.Mutex("x"), dlock.Wait(time.Minute))
	w.waiters("x", 1)
	if info, _ := c.Inspect(w.ctx, "x"); info.Held || len(info.Queue) != 0 {
		t.Fatalf("a blocked acquisition reached the Service: %+v", info)
	}
	unblock()
	unblock() // idempotent
	if r := w.await(waiting); r.err != nil {
		t.Fatalf("after unblock: %v", r.err)
	}

	unblock, _ = w.svc.BlockAcquires("y")
	defer unblock()
	waiting = w.goAcquire(c.Mutex("y"), dlock.Wait(5*time.Second))
	w.waiters("y", 1)
	w.svc.Advance(5 * time.Second)
	if r := w.await(waiting); !errors.Is(r.err, dlock.ErrNotAcquired) || !strings.Contains(r.err.Error(), "did not answer") {
		t.Fatalf("a blocked acquisition whose Wait ran out: %v, want ErrNotAcquired (did not answer)", r.err)
	}
	ctx, cancel := context.WithCancel(w.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := c.Mutex("y").Acquire(ctx, dlock.Wait(0))
		done <- err
	}()
	w.waiters("y", 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a blocked try whose ctx ended: %v, want context.Canceled", err)
	}
}

// TestDelayGrants: a grant that arrives late is held from its grant (the
// lease has that much less left, and nobody else gets the lock meanwhile);
// one that arrives after its lease ran out is given back and refused.
func TestDelayGrants(t *testing.T) {
	w := newWorld(t)
	a, b := w.client(), w.client()
	lease := 10 * time.Second
	if err := w.svc.DelayGrants("x", 1, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	late := w.goAcquire(a.Mutex("x"), dlock.LeaseTime(lease))
	w.waiters("x", 1)
	w.busy(b.Mutex("x"))
	w.svc.Advance(2 * time.Second)
	r := w.await(late)
	if r.err != nil {
		t.Fatal(r.err)
	}
	w.svc.Advance(lease - seam.Drift(lease) - 2*time.Second - time.Millisecond)
	held(t, r.l)
	w.svc.Advance(time.Millisecond)
	lost(t, r.l, observe.LostExpired)
	w.svc.Advance(seam.Drift(lease)) // the Service gives it up

	if err := w.svc.DelayGrants("x", 1, 2*lease); err != nil {
		t.Fatal(err)
	}
	tooLate := w.goAcquire(a.Mutex("x"), dlock.LeaseTime(lease), dlock.Wait(0))
	w.waiters("x", 1)
	w.svc.Advance(2 * lease)
	if r := w.await(tooLate); !errors.Is(r.err, dlock.ErrNotAcquired) || !strings.Contains(r.err.Error(), "arrived after its lease ran out and was given back") {
		t.Fatalf("a grant later than its lease: %v, want ErrNotAcquired (given back)", r.err)
	}
	given := events(w.svc, dlockfake.Release, "x")
	if len(given) != 1 || !errors.Is(given[0].Err, dlock.ErrLockLost) {
		t.Fatalf("the late grant's release: %v, want one (its lease had run out in the Service)", given)
	}
	w.acquire(b.Mutex("x"), dlock.Wait(0))
	for _, tc := range []struct {
		n    int
		d    time.Duration
		want error
	}{{-1, time.Second, dlock.ErrInvalidArgument}, {1, 0, dlock.ErrInvalidDuration}} {
		if err := w.svc.DelayGrants("x", tc.n, tc.d); !errors.Is(err, tc.want) {
			t.Errorf("DelayGrants(%d, %v): %v, want %v", tc.n, tc.d, err, tc.want)
		}
	}
}

// TestPause: a paused holder's lease runs out in the Service and another
// Client is granted the lock while the paused one still believes it holds
// it; Resume tells it. A paused Client's calls wait for Resume.
func TestPause(t *testing.T) {
	w := newWorld(t)
	a, b := w.client(dlockfake.Config{Label: "A"}), w.client(dlockfake.Config{Label: "B"})
	fixed := w.acquire(a.Mutex("fixed"), dlock.LeaseTime(10*time.Second))
	renewed := w.acquire(a.Lock("renewed"))
	a.Pause()
	w.svc.Advance(time.Minute)
	held(t, fixed) // A knows nothing: two holders believe they hold the lock
	held(t, renewed)
	b1 := w.acquire(b.Mutex("fixed"), dlock.Wait(0))
	b2 := w.acquire(b.Lock("renewed"), dlock.Wait(0))
	if b1.Token() <= fixed.Token() || b2.Token() <= renewed.Token() {
		t.Fatal("the next holder's token is not above the paused one's")
	}
	ctx, cancel := context.WithTimeout(w.ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := a.Mutex("free").Acquire(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an Acquire through a paused Client: %v, want it to wait for Resume", err)
	}
	a.Resume() // A's clock jumps: both deadlines have passed
	lost(t, fixed, observe.LostExpired)
	lost(t, renewed, observe.LostUnreachable)
	for _, l := range []*dlock.Lease{b1, b2} {
		if err := l.Verify(w.ctx); err != nil {
			t.Fatalf("the next holder after the paused one woke: %v", err)
		}
	}
	w.acquire(a.Mutex("free"), dlock.Wait(0))
}

// TestRecord: the record lists the Clients' calls in order, with their
// tokens and what the Service answered.
func TestRecord(t *testing.T) {
	w := newWorld(t)
	shop := w.client(dlockfake.Config{Label: "shop"})
	l := w.acquire(shop.Lock("stock:1"))
	if err := l.Verify(w.ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(w.ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(w.ctx); err != nil {
		t.Fatal(err)
	}
	_, refused := shop.Mutex("").Acquire(w.ctx)
	var got []string
	for _, e := range w.svc.Record() {
		if e.Client != "shop" || !e.At.Equal(w.svc.Now()) {
			t.Errorf("event %v: want client shop, at the clock's time", e)
		}
		got = append(got, string(e.Op)+" "+e.Name)
		if (e.Token == l.Token()) != (e.Err == nil) {
			t.Errorf("event %v: want token %d and no error, or no token and an error", e, l.Token())
		}
	}
	want := []string{"acquire stock:1", "verify stock:1", "extend stock:1", "release stock:1", "acquire "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("record %q, want %q", got, want)
	}
	if last := w.svc.Record()[4]; last.Err != refused || !strings.Contains(last.String(), `shop acquire mutex ""`) {
		t.Fatalf("the refused acquisition's event: %v", last)
	}
}

// TestAwaitWaiters: it returns once n calls wait (a MultiLock counts on
// each of its names), ends with its ctx, and refuses bad input.
func TestAwaitWaiters(t *testing.T) {
	w := newWorld(t)
	a, b := w.client(), w.client()
	w.acquire(a.Lock("x"))
	multi := w.goAcquire(b.MultiLock("x", "y"), dlock.Wait(time.Minute))
	lock := w.goAcquire(b.Lock("x"), dlock.Wait(time.Minute))
	w.waiters("x", 2)
	w.waiters("y", 1)
	ctx, cancel := context.WithTimeout(w.ctx, 20*time.Millisecond)
	defer cancel()
	if err := w.svc.AwaitWaiters(ctx, "y", 2); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("AwaitWaiters of more than wait: %v, want the ctx's deadline", err)
	}
	if err := w.svc.AwaitWaiters(w.ctx, "x", 0); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("AwaitWaiters(0): %v, want ErrInvalidArgument", err)
	}
	w.svc.Advance(time.Minute) // the waits run out
	for _, ch := range []<-chan result{multi, lock} {
		if r := w.await(ch); !errors.Is(r.err, dlock.ErrNotAcquired) {
			t.Fatalf("a waiter whose Wait ran out: %v", r.err)
		}
	}
}
