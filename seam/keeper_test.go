package seam

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock/observe"
)

// TestKeeperJoin: a backend's re-entry joins a live hold without the store;
// with no live hold it makes nothing.
func TestKeeperJoin(t *testing.T) {
	k := NewKeeper[*countOps](nil, nil)
	defer k.Close(context.Background(), nil)
	ctx := context.Background()
	if _, ok := k.Join(ctx, "k", "o", nil); ok {
		t.Fatal("joined a hold that does not exist")
	}
	ops := &countOps{}
	l, err := k.Lease(ctx, Grant[*countOps]{Shape: "lock", Name: "n", Key: "k", Owner: "o", Token: 7, Sent: time.Now(), TTL: time.Minute, Ops: ops})
	if err != nil {
		t.Fatal(err)
	}
	j, ok := k.Join(l.Context(), "k", "o", nil)
	if !ok || j.Token() != 7 {
		t.Fatalf("join: %v %v", j, ok)
	}
	if h, _ := k.Count(); h != 1 {
		t.Fatalf("%d holds after a join, want 1", h)
	}
	if err := j.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ops.releases.Load(); n != 0 {
		t.Fatalf("%d releases after the re-entry's unlock: the Keeper counts re-entries, the store is told of the last", n)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := ops.releases.Load(); n != 1 {
		t.Fatalf("%d releases after the last unlock, want 1", n)
	}
	if h, _ := k.Count(); h != 0 {
		t.Fatalf("%d holds after both unlocks", h)
	}
	if _, ok := k.Join(ctx, "k", "o", nil); ok {
		t.Fatal("joined a released hold")
	}
}

// countOps is a store that always says yes, counting releases.
type countOps struct{ releases atomic.Int32 }

func (o *countOps) Release(context.Context) (Released, error) {
	o.releases.Add(1)
	return ReleasedFree, nil
}
func (o *countOps) Extend(context.Context, time.Duration) (bool, error) { return true, nil }
func (o *countOps) Verify(context.Context) (bool, error)                { return true, nil }

// TestKeeperStoreCounts: when the store counts re-entries, every Lease's
// Unlock is a release in the store.
func TestKeeperStoreCounts(t *testing.T) {
	k := NewKeeper[*countOps](nil, nil)
	defer k.Close(context.Background(), nil)
	ctx := context.Background()
	ops := &countOps{}
	g := Grant[*countOps]{Shape: "lock", Name: "n", Key: "k", StoreCounts: true, Owner: "o", Token: 7, Sent: time.Now(), TTL: time.Minute, Ops: ops}
	l, err := k.Lease(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	again, err := k.Lease(l.Context(), g) // the store re-entered: the Lease joins the hold
	if err != nil || again.Token() != 7 {
		t.Fatalf("re-entry: %v %v", again, err)
	}
	for _, x := range []*Lease{again, l} {
		if err := x.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := ops.releases.Load(); n != 2 {
		t.Fatalf("%d releases, want one per Lease", n)
	}
}

// TestKeeperEnter: acquisitions of one reentrant key are serialised; the
// second joins the hold the first registered.
func TestKeeperEnter(t *testing.T) {
	k := NewKeeper[*countOps](nil, nil)
	defer k.Close(context.Background(), nil)
	ctx := context.Background()
	l, done, err := k.Enter(ctx, "k", "o", time.Time{}, nil)
	if err != nil || l != nil || done == nil {
		t.Fatalf("first Enter: %v, done set %v, %v", l, done != nil, err)
	}
	second := make(chan *Lease, 1)
	go func() {
		l, done, err := k.Enter(ctx, "k", "o", time.Time{}, nil)
		if err != nil || done != nil {
			t.Errorf("second Enter: done set %v, %v", done != nil, err)
		}
		second <- l
	}()
	select {
	case <-second:
		t.Fatal("the second Enter went on while the first acquisition was in progress")
	case <-time.After(50 * time.Millisecond):
	}
	first, err := k.Lease(ctx, Grant[*countOps]{Shape: "lock", Name: "n", Key: "k", Owner: "o", Token: 3, Sent: time.Now(), TTL: time.Minute, Ops: &countOps{}})
	if err != nil {
		t.Fatal(err)
	}
	done()
	select {
	case j := <-second:
		if j == nil || j.Token() != 3 {
			t.Fatalf("the second Enter did not join the first's hold: %v", j)
		}
		if err := j.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second Enter did not return after the first's done")
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	k.Close(context.Background(), nil)
	if _, _, err := k.Enter(ctx, "k", "o", time.Time{}, nil); err != ErrClosed {
		t.Fatalf("Enter after Close: %v", err)
	}
}

// TestKeeperEnterUntil: a busy gate is waited for until the given time and
// then refused with ErrNotAcquired; a free gate is taken even with ctx done.
func TestKeeperEnterUntil(t *testing.T) {
	k := NewKeeper[*countOps](nil, nil)
	defer k.Close(context.Background(), nil)
	ctx := context.Background()
	_, done, err := k.Enter(ctx, "k", "o", time.Time{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, _, err := k.Enter(ctx, "k", "o", start.Add(30*time.Millisecond), nil); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("busy gate past until: %v, want ErrNotAcquired", err)
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("refused after %v, before until", d)
	}
	done()
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	for range 20 { // a select between a free gate and a done ctx would pick either
		_, done, err := k.Enter(cancelled, "k", "o", time.Now(), nil)
		if err != nil {
			t.Fatalf("free gate with ctx done: %v", err)
		}
		done()
	}
}

// TestKeeperHeld: Held finds the live hold of a key, and nothing once it
// is released.
func TestKeeperHeld(t *testing.T) {
	k := NewKeeper[*countOps](nil, nil)
	defer k.Close(context.Background(), nil)
	ctx := context.Background()
	if k.Held("k") != nil {
		t.Fatal("a hold before any grant")
	}
	l, err := k.Lease(ctx, Grant[*countOps]{Shape: "lock", Name: "n", Key: "k", Owner: "o", Token: 9, Sent: time.Now(), TTL: time.Minute, Ops: &countOps{}})
	if err != nil {
		t.Fatal(err)
	}
	if h := k.Held("k"); h == nil || h.Token() != 9 {
		t.Fatalf("Held: %v", h)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if k.Held("k") != nil {
		t.Fatal("a hold after its release")
	}
}

// TestLeaseAllocs: on the real clock (a nil clock.Clock), a grant turned
// into a Lease, checked, extended and unlocked costs one allocation, the
// hold (its first Lease inside it), and an Acquire call's event none.
func TestLeaseAllocs(t *testing.T) {
	k := NewKeeper[*countOps](nil, nil)
	defer k.Close(context.Background(), nil)
	ctx := context.Background()
	ops := &countOps{}
	if n := testing.AllocsPerRun(100, func() {
		l, err := k.Lease(ctx, Grant[*countOps]{Shape: "mutex", Name: "n", Token: 7, Sent: time.Now(), TTL: time.Minute, Ops: ops})
		if err != nil {
			t.Fatal(err)
		}
		if l.Err() != nil || l.Extend(ctx, time.Minute) != nil || l.Unlock(ctx) != nil {
			t.Fatal("the lease was not kept")
		}
	}); n != 1 {
		t.Fatalf("%v allocations per Lease, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		c, err := k.Begin(ctx, Request{Shape: "mutex", Name: "n"}, nil)
		_ = c.End(nil, err)
	}); n != 0 {
		t.Fatalf("%v allocations per Acquire call's begin and end, want 0", n)
	}
}

// lostCount counts the losses an Observer is told of.
type lostCount struct {
	observe.Nop
	n atomic.Int64
}

func (o *lostCount) ObserveLost(observe.LostEvent) { o.n.Add(1) }

// TestUnlockRacesLoss: a hold lost (and reported) while its last Lease is
// being unlocked makes that Unlock return ErrLockLost; an Unlock that
// returns nil means the hold ended released, and no loss was reported.
// The two race many times.
func TestUnlockRacesLoss(t *testing.T) {
	obs := &lostCount{}
	k := NewKeeper[*countOps](obs, nil)
	defer k.Close(context.Background(), nil)
	ctx := context.Background()
	lost, losses := 0, 0
	for i := range 20000 {
		l, err := k.Lease(ctx, Grant[*countOps]{Shape: "mutex", Name: "n", Token: int64(i + 1), Sent: time.Now(), TTL: time.Minute, Ops: &countOps{}})
		if err != nil {
			t.Fatal(err)
		}
		h := k.HoldOf(l)
		before := obs.n.Load()
		start := make(chan struct{})
		reported := make(chan bool, 1)
		go func() {
			<-start
			reported <- h.Lose(observe.LostDeletedOrTaken)
		}()
		close(start)
		err = l.Unlock(ctx)
		r := <-reported
		if r {
			losses++
		}
		if (obs.n.Load() > before) != r {
			t.Fatalf("round %d: Lose reported %v, the Observer was told of %d losses", i, r, obs.n.Load()-before)
		}
		switch {
		case r && err == nil:
			t.Fatalf("round %d: Unlock returned nil for a hold whose loss was reported", i)
		case errors.Is(err, ErrLockLost):
			lost++
		case err != nil:
			t.Fatalf("round %d: Unlock: %v", i, err)
		}
	}
	t.Logf("%d of 20000 Unlocks found the loss first (%d losses reported)", lost, losses)
}

// TestWholeHoldGivenBack: a grant the store counts re-entries of
// (StoreCounts), held by three Leases, is released once per Lease when
// the Keeper ends it itself (MaxHold, Close), and no Unlock sends anything
// after that.
func TestWholeHoldGivenBack(t *testing.T) {
	ctx := context.Background()
	for _, end := range []string{"maxhold", "close"} {
		t.Run(end, func(t *testing.T) {
			k := NewKeeper[*countOps](nil, nil)
			defer k.Close(ctx, nil)
			ops := &countOps{}
			g := Grant[*countOps]{Shape: "lock", Name: "n", Key: "k", StoreCounts: true, Owner: "o", Token: 7, Sent: time.Now(), TTL: time.Minute, Ops: ops}
			if end == "maxhold" {
				g.MaxHold = 50 * time.Millisecond
			}
			var ls []*Lease
			for range 3 {
				l, err := k.Lease(ctx, g)
				if err != nil {
					t.Fatal(err)
				}
				ls = append(ls, l)
			}
			if end == "close" {
				k.Close(ctx, nil)
			} else {
				<-ls[0].Done()
			}
			deadline := time.Now().Add(5 * time.Second)
			for ops.releases.Load() < 3 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if n := ops.releases.Load(); n != 3 {
				t.Fatalf("%d releases after %s ended a hold of 3 Leases, want 3", n, end)
			}
			for _, l := range ls {
				if err := l.Unlock(ctx); !errors.Is(err, ErrLockLost) {
					t.Fatalf("Unlock after %s: %v, want ErrLockLost", end, err)
				}
			}
			if n := ops.releases.Load(); n != 3 {
				t.Fatalf("%d releases after the Unlocks, want still 3: the Keeper released the whole hold", n)
			}
		})
	}
}

// failOps is a store whose releases all fail.
type failOps struct{ countOps }

var errStoreDown = errors.New("store down")

func (o *failOps) Release(context.Context) (Released, error) {
	o.releases.Add(1)
	return ReleasedNotOurs, errStoreDown
}

// releaseErrs passes on the Err of every ReleaseEvent.
type releaseErrs struct {
	observe.Nop
	errs chan error
}

func (o *releaseErrs) ObserveRelease(ev observe.ReleaseEvent) { o.errs <- ev.Err }

// TestReleaseErrorsCounted: a release that fails in the store is never
// silent. An Unlock's is its error and its ReleaseEvent's Err; the
// Keeper's own (at MaxHold, Close's, a grant given back after Close) are
// counted by GiveBackErrors.
func TestReleaseErrorsCounted(t *testing.T) {
	obs := &releaseErrs{errs: make(chan error, 1)}
	k := NewKeeper[*failOps](obs, nil)
	ctx := context.Background()
	grant := func(maxHold time.Duration) Grant[*failOps] {
		return Grant[*failOps]{Shape: "mutex", Name: "n", Token: 1, Sent: time.Now(), TTL: time.Minute, MaxHold: maxHold, Ops: &failOps{}}
	}
	l, err := k.Lease(ctx, grant(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, errStoreDown) {
		t.Fatalf("Unlock with the store down: %v, want its error", err)
	}
	if err := <-obs.errs; !errors.Is(err, errStoreDown) {
		t.Fatalf("ReleaseEvent.Err: %v, want the store's error", err)
	}
	capped, err := k.Lease(ctx, grant(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-capped.Done()
	waitCount := func(want int64) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for k.GiveBackErrors() != want {
			if time.Now().After(deadline) {
				t.Fatalf("GiveBackErrors %d, want %d", k.GiveBackErrors(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitCount(1)
	if _, err := k.Lease(ctx, grant(0)); err != nil {
		t.Fatal(err)
	}
	k.Close(ctx, nil)
	waitCount(2)
	if _, err := k.Lease(ctx, grant(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Lease after Close: %v", err)
	}
	waitCount(3)
}

// TestLeaseContextParent: a Lease taken under another Lease's Context ends
// with it (a nested section), but for a downgrade (the read side of the
// same RWLock under its owner's write Lease), whose Context outlives the
// write's unlock and ends with the ctx the write side was acquired with.
func TestLeaseContextParent(t *testing.T) {
	k := NewKeeper[*countOps](nil, nil)
	defer k.Close(context.Background(), nil)
	outer, cancel := context.WithCancel(context.Background())
	defer cancel()
	grant := func(ctx context.Context, shape, name, key string) *Lease {
		t.Helper()
		l, err := k.Lease(ctx, Grant[*countOps]{Shape: shape, Name: name, Key: key, Owner: OwnerOf(ctx), Token: 1, Sent: time.Now(), TTL: time.Minute, Ops: &countOps{}})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	w := grant(outer, "rw_write", "n", "w")
	nested := grant(w.Context(), "lock", "m", "l")
	other := grant(w.Context(), "rw_read", "other", "o")
	down := grant(w.Context(), "rw_read", "n", "r")
	if CarriedOwner(down.Context()) != CarriedOwner(w.Context()) {
		t.Fatal("the downgrade's Context carries another owner")
	}
	if err := w.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if nested.Context().Err() == nil || other.Context().Err() == nil {
		t.Fatal("a Lease taken under the write Lease's Context outlived its unlock")
	}
	// The write side taken under a Lease of the same owner (a Lock): its
	// downgrade ends with that Lease, not with the write's unlock.
	outerLock := grant(outer, "lock", "x", "x")
	w2 := grant(outerLock.Context(), "rw_write", "n2", "w2")
	down2 := grant(w2.Context(), "rw_read", "n2", "r2")
	if err := w2.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := down2.Context().Err(); err != nil {
		t.Fatalf("a downgrade under a write taken under another Lease ended with the write's unlock: %v", err)
	}
	if err := outerLock.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if down2.Context().Err() == nil {
		t.Fatal("that downgrade's Context outlived the Lease its write side was taken under")
	}
	if err := down.Context().Err(); err != nil {
		t.Fatalf("the downgrade's Context ended with the write's unlock: %v", err)
	}
	cancel()
	if down.Context().Err() == nil {
		t.Fatal("the downgrade's Context outlived the ctx the write side was acquired with")
	}
}
