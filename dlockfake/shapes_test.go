package dlockfake_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockfake"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/observe"
)

// TestArrivalOrder: waiters are granted in the order they came, whatever
// the goroutines' scheduling; FairLock and Lock of one name are one lock;
// a try is refused while a waiter is ahead of it.
func TestArrivalOrder(t *testing.T) {
	w := newWorld(t)
	a, b, c, d := w.client(), w.client(), w.client(), w.client()
	holder := w.acquire(a.Lock("x"))
	var waiters []<-chan result
	for i, l := range []dlock.Locker{b.Lock("x"), c.FairLock("x"), d.Lock("x")} {
		waiters = append(waiters, w.goAcquire(l, dlock.Wait(time.Hour)))
		w.waiters("x", i+1) // queued before the next one comes
	}
	prev := holder
	for i, ch := range waiters {
		if err := prev.Unlock(w.ctx); err != nil {
			t.Fatal(err)
		}
		r := w.await(ch)
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		w.busy(a.Lock("x"))
		for _, later := range waiters[i+1:] {
			select {
			case r := <-later:
				t.Fatalf("a later waiter was granted before waiter %d: %v", i, r.err)
			default:
			}
		}
		prev = r.l
	}
}

// TestMaxHoldOnTheClock: a renewed lease with MaxHold is lost at the cap
// (max_hold) and freed in the Service at once.
func TestMaxHoldOnTheClock(t *testing.T) {
	w := newWorld(t)
	a, b := w.client(), w.client()
	l := w.acquire(a.Lock("x"), dlock.MaxHold(time.Minute))
	w.svc.Advance(time.Minute - time.Millisecond)
	held(t, l)
	w.svc.Advance(time.Millisecond)
	lost(t, l, observe.LostMaxHold)
	w.acquire(b.Lock("x"), dlock.Wait(0))
}

// TestOwnLocks: re-entries, a downgrade granted at once (a writer waiting
// behind the write side would wait for it for ever), an upgrade refused,
// and an owner refused a MultiLock over a name it holds through a Lock (it
// would wait for itself).
func TestOwnLocks(t *testing.T) {
	w := newWorld(t)
	c := w.client()
	outer := w.acquire(c.Lock("x"))
	inner, err := c.FairLock("x").Acquire(outer.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if inner.Token() != outer.Token() {
		t.Fatalf("re-entry token %d, want the holder's %d", inner.Token(), outer.Token())
	}
	if _, err := c.MultiLock("x", "y").Acquire(outer.Context(), dlock.Wait(0)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("a MultiLock over a name its owner holds: %v, want ErrInvalidArgument", err)
	}
	rw := c.RWLock("rw")
	wl := w.acquire(rw.WriteLock())
	w.goAcquire(w.client().RWLock("rw").WriteLock(), dlock.Wait(time.Hour))
	w.waiters("rw", 1)
	if _, err := rw.ReadLock().Acquire(wl.Context(), dlock.Wait(0)); err != nil {
		t.Fatalf("downgrade with a writer waiting: %v", err)
	}
	if err := wl.Unlock(w.ctx); err != nil {
		t.Fatal(err)
	}
	rl := w.acquire(c.RWLock("rw2").ReadLock())
	if _, err := c.RWLock("rw2").WriteLock().Acquire(rl.Context(), dlock.Wait(0)); !errors.Is(err, dlock.ErrUpgrade) {
		t.Fatalf("upgrade: %v, want ErrUpgrade", err)
	}
}

// TestNewClientBadInput: a bad Config is refused.
func TestNewClientBadInput(t *testing.T) {
	svc := dlockfake.New()
	for _, tc := range []struct {
		cfg  []dlockfake.Config
		want error
	}{
		{[]dlockfake.Config{{TTL: 9 * time.Millisecond}}, dlock.ErrInvalidDuration},
		{[]dlockfake.Config{{Label: string(make([]byte, 257))}}, dlock.ErrInvalidArgument},
		{[]dlockfake.Config{{}, {}}, dlock.ErrInvalidArgument},
	} {
		c, err := svc.NewClient(tc.cfg...)
		if c != nil {
			t.Errorf("NewClient(%+v) returned a Client", tc.cfg)
		}
		dlocktest.CheckError(t, err, tc.want, "dlock: new client: ")
	}
	c, err := svc.NewClient()
	if err != nil || c.Label() != "client1" {
		t.Fatalf("the first Client: %v, label %q", err, c.Label())
	}
	c.Close()
}
