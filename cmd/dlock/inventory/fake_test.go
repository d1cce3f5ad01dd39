package inventory_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/dlockfake"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/observe"
)

// The lock and fenced strategies' loss paths, each driven through a fake
// lock service (dlockfake) on a clock the test moves, with the stock in
// SQLite: no server, no sleep, the same result on every run. Process A
// buys; the fault strikes inside its critical section (inventory's
// section hook), where process B may buy too; then the books must balance.

// fakeShop is one sale: a SKU of its own in the stock, and processes A and
// B selling it with the same strategy, each through its own Client of one
// Service.
type fakeShop struct {
	t         *testing.T
	ctx       context.Context
	svc       *dlockfake.Service
	store     inventory.Store
	sku, lock string
	ac        *dlockfake.Client // A's
	a, b      inventory.Strategy
}

// fakeStock opens the SQLite stock the sales of one test share.
func fakeStock(t *testing.T) inventory.Store {
	t.Helper()
	st, err := inventory.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

var fakeSKUs atomic.Int64

// newFakeShop puts 10 units of a new SKU on sale in st.
func newFakeShop(t *testing.T, st inventory.Store, strategy string, o inventory.Options) *fakeShop {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	sku := fmt.Sprintf("fake-%d", fakeSKUs.Add(1))
	if _, err := st.AddSKU(ctx, sku, 10); err != nil {
		t.Fatal(err)
	}
	f := &fakeShop{t: t, ctx: ctx, svc: dlockfake.New(), store: st, sku: sku, lock: inventory.LockName(sku)}
	process := func(label string) (*dlockfake.Client, inventory.Strategy) {
		c, err := f.svc.NewClient(dlockfake.Config{Label: label})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		s, err := inventory.New(strategy, inventory.Deps{Store: st, Lockers: c}, o)
		if err != nil {
			t.Fatal(err)
		}
		return c, s
	}
	f.ac, f.a = process("A")
	_, f.b = process("B")
	return f
}

// buy has A buy one unit (its request id is the same on every call: a
// retry).
func (f *fakeShop) buy() (inventory.Result, error) {
	return f.a.Buy(f.ctx, f.sku, 1, "alice", f.sku+"-a")
}

// inside makes A run fault inside its critical section, where it holds the
// lock, once it took it (exit: once its transaction is over).
func (f *fakeShop) inside(fault func(), exit func()) {
	inventory.SetSection(f.a, func(string) func() {
		if fault != nil {
			fault()
		}
		return func() {
			if exit != nil {
				exit()
			}
		}
	})
}

// bSells has B buy one unit: it must sell.
func (f *fakeShop) bSells() {
	f.t.Helper()
	res, err := f.b.Buy(f.ctx, f.sku, 1, "bob", f.sku+"-b")
	if err != nil || res.Outcome != inventory.Sold {
		f.t.Errorf("B: %+v %v, want sold", res, err)
	}
}

// must fails the test on a fault control's error.
func (f *fakeShop) must(err error) {
	f.t.Helper()
	if err != nil {
		f.t.Fatal(err)
	}
}

// books checks that the books balance (stock + units sold = initial, no
// oversell) with sold units sold.
func (f *fakeShop) books(sold int64) {
	f.t.Helper()
	rep, err := inventory.Reconcile(f.ctx, f.store, f.sku)
	if err != nil {
		f.t.Fatal(err)
	}
	if !rep.Clean() || rep.Units != sold || rep.Qty+rep.Units != rep.Initial {
		f.t.Fatalf("books: %s, want %d sold and clean", rep, sold)
	}
}

// loss is one way A's lock is lost inside its critical section.
type loss struct {
	name  string
	fault func(f *fakeShop) // run inside A's section
}

// losses are the losses both strategies are driven through: the lock lost
// for each reason (A is told), taken behind A's back (A is not), renewals
// failing until the lease runs out, and A paused past its lease. B buys
// meanwhile when b is set.
func losses(b bool) []loss {
	then := func(f *fakeShop) {
		if b {
			f.bSells()
		}
	}
	ls := []loss{
		{"taken", func(f *fakeShop) {
			release, err := f.svc.Take(f.lock)
			f.must(err)
			release()
			then(f)
		}},
		{"renewals failed", func(f *fakeShop) {
			f.must(f.svc.FailRenewals(f.lock, 2))
			f.svc.Advance(dlockfake.DefaultTTL)
			then(f)
		}},
		{"paused", func(f *fakeShop) {
			f.ac.Pause()
			f.svc.Advance(dlockfake.DefaultTTL)
			then(f) // while A believes it holds the lock
			f.ac.Resume()
		}},
	}
	for _, reason := range []observe.LostReason{observe.LostExpired, observe.LostDeletedOrTaken, observe.LostUnreachable} {
		ls = append(ls, loss{"lost " + string(reason), func(f *fakeShop) {
			f.must(f.svc.Lose(f.lock, reason))
			then(f)
		}})
	}
	return ls
}

// TestLockStrategyLosses: a lock lost inside the critical section, however
// it is lost and whether A is told or finds out by its Verify, rolls A's
// sale back (Failed, ErrLockLost), B's sale stands, and A's request may be
// retried; a loss found by the release, after the commit, is reported for
// reconciling and the sale stands.
func TestLockStrategyLosses(t *testing.T) {
	st := fakeStock(t)
	for _, l := range losses(true) {
		t.Run(l.name, func(t *testing.T) {
			f := newFakeShop(t, st, "lock", inventory.Options{})
			f.inside(func() { l.fault(f) }, nil)
			res, err := f.buy()
			if res.Outcome != inventory.Failed || !errors.Is(err, dlock.ErrLockLost) || errors.Is(err, inventory.ErrLockLost) {
				t.Fatalf("A: %+v %v, want Failed, rolled back with dlock.ErrLockLost", res, err)
			}
			f.books(1)
			inventory.SetSection(f.a, nil)
			if res, err := f.buy(); err != nil || res.Outcome != inventory.Sold {
				t.Fatalf("A's retry: %+v %v, want sold", res, err)
			}
			f.books(2)
		})
	}
	t.Run("lost after the commit", func(t *testing.T) {
		f := newFakeShop(t, st, "lock", inventory.Options{})
		f.inside(nil, func() { f.must(f.svc.Lose(f.lock, observe.LostUnreachable)) })
		res, err := f.buy()
		if res.Outcome != inventory.Failed || !errors.Is(err, inventory.ErrLockLost) {
			t.Fatalf("A: %+v %v, want Failed with inventory.ErrLockLost (reconcile)", res, err)
		}
		f.books(1)
	})
	t.Run("fixed lease ran out", func(t *testing.T) {
		f := newFakeShop(t, st, "lock", inventory.Options{Lease: 5 * time.Second})
		f.inside(func() { f.svc.Advance(5 * time.Second) }, nil)
		res, err := f.buy()
		if res.Outcome != inventory.Failed || !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("A: %+v %v, want Failed with dlock.ErrLockLost", res, err)
		}
		f.books(0)
	})
}

// TestFencedStrategyLosses: the fenced strategy writes whatever its lease
// says, and the stock's fence decides: after each loss, a write by B with
// a newer token makes A's stale write rejected (fence.ErrStale, counted);
// with no newer writer, A's write is a valid sale, reported as LeaseLost.
func TestFencedStrategyLosses(t *testing.T) {
	st := fakeStock(t)
	for _, l := range losses(true) {
		t.Run(l.name+", then B sold", func(t *testing.T) {
			f := newFakeShop(t, st, "fenced", inventory.Options{})
			f.inside(func() { l.fault(f) }, nil)
			res, err := f.buy()
			if res.Outcome != inventory.Failed || !errors.Is(err, fence.ErrStale) {
				t.Fatalf("A (stale): %+v %v, want Failed with fence.ErrStale", res, err)
			}
			if n := f.a.(*inventory.Fenced).Rejected(); n != 1 {
				t.Fatalf("%d stale writes counted, want 1", n)
			}
			f.books(1)
		})
	}
	for _, l := range losses(false) {
		t.Run(l.name+", nobody wrote", func(t *testing.T) {
			f := newFakeShop(t, st, "fenced", inventory.Options{})
			f.inside(func() { l.fault(f) }, nil)
			res, err := f.buy()
			if err != nil || res.Outcome != inventory.Sold || !res.LeaseLost {
				t.Fatalf("A: %+v %v, want sold with LeaseLost", res, err)
			}
			f.books(1)
		})
	}
}

// TestLockedStrategiesBusyAndDown: while another process holds the lock,
// a buy waits its Wait and answers Busy; when the lock service fails the
// acquisition, Failed; nothing is sold either way, and a retry sells.
func TestLockedStrategiesBusyAndDown(t *testing.T) {
	st := fakeStock(t)
	for _, strategy := range []string{"lock", "fenced"} {
		t.Run(strategy, func(t *testing.T) {
			f := newFakeShop(t, st, strategy, inventory.Options{})
			release, err := f.svc.Take(f.lock)
			f.must(err)
			done := make(chan inventory.Result, 1)
			go func() {
				res, _ := f.buy()
				done <- res
			}()
			f.must(f.svc.AwaitWaiters(f.ctx, f.lock, 1))
			f.svc.Advance(inventory.DefaultWait)
			if res := <-done; res.Outcome != inventory.Busy {
				t.Fatalf("A while the lock is held elsewhere: %+v, want busy", res)
			}
			release()
			f.must(f.svc.FailAcquires(f.lock, 1))
			res, err := f.buy()
			if res.Outcome != inventory.Failed || !errors.Is(err, dlockfake.ErrUnreachable) {
				t.Fatalf("A with the lock service down: %+v %v, want Failed with the store's error", res, err)
			}
			f.books(0)
			if res, err := f.buy(); err != nil || res.Outcome != inventory.Sold {
				t.Fatalf("A's retry: %+v %v, want sold", res, err)
			}
			f.books(1)
		})
	}
}
