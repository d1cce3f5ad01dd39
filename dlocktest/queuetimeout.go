package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

// liveWaiter: a waiter of a Mutex or Lock (granted in arrival order) with
// QueueTimeout(d) that waits 3d keeps its place (it refreshes it): it is
// granted before a waiter that came after it.
func (s *suite) liveWaiter(t *testing.T, sh shape) {
	d := s.b.QueueTimeout
	if d == 0 {
		t.Skip("the backend does not honour QueueTimeout")
	}
	ls := s.lockers(t, sh, 3)
	n := name(t)
	ctx := testCtx(t, 3*d+60*time.Second)
	holder := acquire(t, ctx, ls[0](n))
	type result struct {
		who string
		l   *dlock.Lease
	}
	got := make(chan result, 2)
	wait := func(who string, l dlock.Locker) {
		lease, err := l.Acquire(ctx, dlock.QueueTimeout(d), dlock.Wait(3*d+30*time.Second))
		if err != nil {
			t.Errorf("waiter %s: %v", who, err)
		}
		got <- result{who, lease}
	}
	go wait("first", ls[1](n))
	time.Sleep(300 * time.Millisecond) // the first waiter queues
	go wait("second", ls[2](n))
	select {
	case r := <-got:
		t.Fatalf("waiter %s got the held lock", r.who)
	case <-time.After(3 * d):
	}
	unlock(t, holder)
	r := <-got
	if r.l == nil {
		return
	}
	if r.who != "first" {
		t.Fatalf("the %s waiter was granted first: the first lost its place while it waited %v with QueueTimeout(%v)", r.who, 3*d, d)
	}
	select {
	case r2 := <-got:
		t.Fatalf("the %s waiter got the lock beside the first", r2.who)
	case <-time.After(200 * time.Millisecond):
	}
	unlock(t, r.l)
	if r2 := <-got; r2.l != nil {
		unlock(t, r2.l)
	}
}

// liveWriter: a writer of a read-write lock with QueueTimeout(d) that waits
// 3d for a reader to leave keeps its place: it still holds back the readers
// that come after it, and gets the lock when the reader leaves.
func (s *suite) liveWriter(t *testing.T) {
	d := s.b.QueueTimeout
	if d == 0 {
		t.Skip("the backend does not honour QueueTimeout")
	}
	cs := s.rwClients(t, 3)
	a, b, c := cs[0], cs[1], cs[2]
	n := name(t)
	ctx := testCtx(t, 3*d+60*time.Second)
	r := acquire(t, ctx, a.Read(n))
	got := acquireLater(t, ctx, b.Write(n), dlock.QueueTimeout(d), dlock.Wait(3*d+30*time.Second))
	select {
	case <-got:
		t.Fatal("the writer got in beside a reader")
	case <-time.After(3 * d):
	}
	if _, err := c.Read(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a reader after a writer that waited %v with QueueTimeout(%v): %v, want ErrNotAcquired (the writer's place holds readers back)", 3*d, d, err)
	}
	unlock(t, r)
	if w := <-got; w != nil {
		unlock(t, w)
	}
}

// silentWaiter: a waiter with QueueTimeout(d) that goes silent (cut off)
// blocks the waiter behind it for at most about d after the lock is free.
func (s *suite) silentWaiter(t *testing.T, sh shape) {
	d := s.b.QueueTimeout
	if d == 0 || s.b.NewCutClient == nil {
		t.Skip("the backend does not honour QueueTimeout, or cannot cut a client off")
	}
	ls := s.lockers(t, sh, 2)
	silent, cut := s.b.NewCutClient(t)
	sl := sh.get(silent)
	if sl == nil {
		t.Skipf("the backend has no %s", sh.name)
	}
	n := name(t)
	ctx := testCtx(t, 3*d+60*time.Second)
	holder := acquire(t, ctx, ls[0](n))
	sctx, stop := context.WithCancel(ctx)
	silentDone := make(chan struct{})
	go func() {
		defer close(silentDone)
		l, err := sl(n).Acquire(sctx, dlock.QueueTimeout(d))
		if err == nil { // granted before the cut: give it back if it can
			_ = l.Unlock(context.Background())
		}
	}()
	defer func() { stop(); <-silentDone }()
	time.Sleep(300 * time.Millisecond) // the silent waiter queues
	got := acquireLater(t, ctx, ls[1](n), dlock.QueueTimeout(d), dlock.Wait(3*d+30*time.Second))
	time.Sleep(300 * time.Millisecond) // the live waiter queues behind it
	cut()
	cutAt := time.Now()
	unlock(t, holder)
	var l *dlock.Lease
	select {
	case l = <-got:
	case <-time.After(3*d + 30*time.Second):
		t.Fatal("the waiter behind a silent one never got the lock")
	}
	if l == nil {
		return
	}
	defer unlock(t, l)
	// The silent waiter's place (or a hand-off to it) lasts at most d from
	// its last refresh, made before the cut; the live one looks again
	// within d/3, and a second of slack covers a loaded machine.
	waited := time.Since(cutAt)
	if bound := d + d/3 + time.Second; waited > bound {
		t.Fatalf("the waiter behind a silent one got the lock %v after the cut (QueueTimeout %v, bound %v)", waited, d, bound)
	}
	t.Logf("granted %v after the silent waiter was cut off (QueueTimeout %v)", waited.Round(time.Millisecond), d)
}
