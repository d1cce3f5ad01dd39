package dlocktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
)

// lostEvents is an Observer that passes on the reasons of the losses it
// is told of.
type lostEvents struct {
	observe.Nop
	reasons chan observe.LostReason
}

func (o *lostEvents) ObserveLost(ev observe.LostEvent) {
	select {
	case o.reasons <- ev.Reason:
	default:
	}
}

// maxHold: a lease kept by renewals with MaxHold(d), d longer than a
// renewed grant lasts, is lost at d (Done, Err and the Context's cause
// wrap ErrLockLost and name max_hold; the Observer hears LostMaxHold),
// and released in the store: a waiter queued behind it is granted the
// lock within a renewal's third, not when a grant left in the store would
// expire (on a session store: never, while the session lives).
func (s *suite) maxHold(t *testing.T, sh shape) {
	d := s.b.Renewal * 3 / 2
	events := &lostEvents{reasons: make(chan observe.LostReason, 8)}
	var c Client
	if s.b.NewObservedClient != nil {
		c = s.b.NewObservedClient(t, events)
	} else {
		c = s.b.NewClient(t)
	}
	get, other := sh.get(c), s.lockers(t, sh, 1)[0]
	if get == nil {
		t.Skipf("the backend has no %s", sh.name)
	}
	n := name(t)
	ctx := testCtx(t, d+60*time.Second)
	start := time.Now()
	l := acquire(t, ctx, get(n), dlock.MaxHold(d))
	got := acquireLater(t, ctx, other(n), dlock.Wait(d+30*time.Second))
	var lostAt time.Time
	select {
	case <-l.Done():
		lostAt = time.Now()
	case w := <-got:
		t.Fatalf("another client got the lock beside a holder with MaxHold(%v) (%v)", d, w)
	case <-time.After(d + 10*time.Second):
		t.Fatalf("a lease with MaxHold(%v) still held after %v", d, time.Since(start))
	}
	held := lostAt.Sub(start)
	t.Logf("lost %v after the acquisition began (MaxHold %v)", held.Round(time.Millisecond), d)
	// The cap counts from the grant's request (on a session store, from
	// the session's last renewal before the grant, up to a third of a
	// renewal earlier), and the Keeper's timer ends the lease then.
	if low, high := d-s.b.Renewal/3-toldSlack, d+time.Second+toldSlack; held < low || held > high {
		t.Fatalf("a lease with MaxHold(%v) was lost after %v, want within [%v, %v]", d, held, low, high)
	}
	err := l.Err()
	if !errors.Is(err, dlock.ErrLockLost) || !strings.Contains(err.Error(), string(observe.LostMaxHold)) {
		t.Fatalf("Err after MaxHold: %v, want ErrLockLost (%s)", err, observe.LostMaxHold)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, dlock.ErrLockLost) {
		t.Fatalf("the Context's cause after MaxHold: %v, want ErrLockLost", cause)
	}
	if s.b.NewObservedClient != nil {
		select {
		case r := <-events.reasons:
			if r != observe.LostMaxHold {
				t.Fatalf("the Observer was told %q, want %q", r, observe.LostMaxHold)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the Observer was not told of the loss")
		}
	}
	var w *dlock.Lease
	select {
	case w = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never got the lock after the holder's MaxHold")
	}
	if w == nil {
		return
	}
	defer unlock(t, w)
	gap := time.Since(lostAt)
	if bound := s.b.Renewal/3 + toldSlack; gap > bound {
		t.Fatalf("the waiter got the lock %v after the holder's MaxHold ended it, want within %v (released in the store)", gap, bound)
	}
	if w.Token() <= l.Token() {
		t.Fatalf("the next token %d is not above %d", w.Token(), l.Token())
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after MaxHold: %v, want ErrLockLost", err)
	}
}
