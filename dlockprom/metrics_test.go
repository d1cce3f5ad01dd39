package dlockprom_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/redis/go-redis/v9"
)

// A key deleted under a held lock, found by Unlock: one loss
// (deleted_or_taken), one unlock that found it lost, no lease left held.
func TestForcedLossFoundByUnlock(t *testing.T) {
	r := newRig(t, nil)
	ctx := testCtx(t)
	for shape, lk := range map[string]dlock.Locker{"mutex": r.c.Mutex("stock:1001"), "lock": r.c.Lock("stock:1002")} {
		l, err := lk.Acquire(ctx, dlock.Wait(0))
		if err != nil {
			t.Fatalf("%s: acquire: %v", shape, err)
		}
		if v := get(t, r.reg, "dlock_held_leases", "shape", shape, "group", "stock").value; v != 1 {
			t.Fatalf("%s: held_leases = %v while held, want 1", shape, v)
		}
		if err := r.rdb.Del(ctx, "dlock:{"+lk.Name()+"}").Err(); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("%s: unlock after DEL = %v, want ErrLockLost", shape, err)
		}
		lost := gather(t, r.reg, "dlock_lost_total")
		if s := get(t, r.reg, "dlock_lost_total", "shape", shape, "group", "stock", "reason", "deleted_or_taken"); s.value != 1 {
			t.Fatalf("%s: lost{deleted_or_taken} = %v, want 1 (all: %+v)", shape, s.value, lost)
		}
		if s := get(t, r.reg, "dlock_unlock_found_lost_total", "shape", shape, "group", "stock"); s.value != 1 {
			t.Fatalf("%s: unlock_found_lost = %v, want 1", shape, s.value)
		}
		if v := get(t, r.reg, "dlock_held_leases", "shape", shape, "group", "stock").value; v != 0 {
			t.Fatalf("%s: held_leases = %v after the loss, want 0", shape, v)
		}
	}
	if v := total(t, r.reg, "dlock_lost_total"); v != 2 {
		t.Fatalf("lost_total over all series = %v, want 2", v)
	}
}

// The watchdog finds the deleted key first; the later Unlock is counted as
// an unlock that found the lock lost, and the loss is still counted once.
func TestForcedLossFoundByWatchdog(t *testing.T) {
	r := newRig(t, []dlock.Config{{TTL: 300 * time.Millisecond}})
	ctx := testCtx(t)
	l, err := r.c.Mutex("stock:7").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.rdb.Del(ctx, "dlock:{stock:7}").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not find the deleted key")
	}
	lost := func() float64 {
		return get(t, r.reg, "dlock_lost_total", "shape", "mutex", "group", "stock", "reason", "deleted_or_taken").value
	}
	// Done closes before the observer hears of the loss: wait for the
	// observer to have handled the LostEvent, then read its metrics.
	r.waitLost(t, 1)
	if v := lost(); v != 1 {
		t.Fatalf("lost = %v after the loss, want 1", v)
	}
	if v := get(t, r.reg, "dlock_held_leases", "shape", "mutex").value; v != 0 {
		t.Fatalf("held_leases = %v after the loss, want 0", v)
	}
	if v := get(t, r.reg, "dlock_unlock_found_lost_total").value; v != 0 {
		t.Fatalf("unlock_found_lost = %v before any unlock, want 0", v)
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("unlock = %v, want ErrLockLost", err)
	}
	if v := lost(); v != 1 {
		t.Fatalf("lost = %v after unlock, want still 1", v)
	}
	if v := get(t, r.reg, "dlock_unlock_found_lost_total", "shape", "mutex", "group", "stock").value; v != 1 {
		t.Fatalf("unlock_found_lost = %v, want 1", v)
	}
	if v := get(t, r.reg, "dlock_held_leases", "shape", "mutex").value; v != 0 {
		t.Fatalf("held_leases = %v after unlock, want 0", v)
	}
}

// A paused Redis (SIGSTOP) makes renewals fail until the lease runs out on
// the client's clock: renewal failures, and one loss as unreachable. (The
// go-redis client honours the watchdog's per-round deadline only with
// ContextTimeoutEnabled; otherwise a renewal blocks for its ReadTimeout.)
func TestUnreachableRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	r := newRigOn(t, rdb, []dlock.Config{{TTL: 600 * time.Millisecond}})
	ctx := testCtx(t)
	l, err := r.c.Lock("job:17").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = srv.Resume()
		}
	}()
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("lease not lost while Redis was paused")
	}
	r.waitLost(t, 1)
	if v := get(t, r.reg, "dlock_lost_total", "shape", "lock", "group", "job", "reason", "unreachable").value; v != 1 {
		t.Fatalf("lost{unreachable} = %v after the loss, want 1", v)
	}
	if v := get(t, r.reg, "dlock_held_leases", "shape", "lock").value; v != 0 {
		t.Fatalf("held_leases = %v after the loss, want 0", v)
	}
	eventually(t, 10*time.Second, "a renewal failure counted", func() bool {
		return get(t, r.reg, "dlock_renewal_failures_total", "shape", "lock", "group", "job").value >= 1
	})
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	if v := total(t, r.reg, "dlock_lost_total"); v != 1 {
		t.Fatalf("lost_total = %v, want 1 (all: %+v)", v, gather(t, r.reg, "dlock_lost_total"))
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("unlock = %v, want ErrLockLost", err)
	}
	if v := get(t, r.reg, "dlock_unlock_found_lost_total", "shape", "lock").value; v != 1 {
		t.Fatalf("unlock_found_lost = %v, want 1", v)
	}
	if v := get(t, r.reg, "dlock_held_leases", "shape", "lock").value; v != 0 {
		t.Fatalf("held_leases = %v, want 0", v)
	}
}

// Waiters that queue behind a holder record their waits; mutual exclusion
// holds throughout (overlap witness).
func TestContendedRunRecordsWaits(t *testing.T) {
	r := newRig(t, nil)
	ctx := testCtx(t)
	const waiters, rounds = 3, 10
	const firstHold = 60 * time.Millisecond
	var w witness.Witness
	m := r.c.Mutex("stock:42")
	first, err := m.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Enter("stock:42")
	var wg sync.WaitGroup
	errs := make(chan error, waiters*rounds)
	started := make(chan struct{}, waiters)
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			for range rounds {
				l, err := m.Acquire(ctx, dlock.Wait(30*time.Second))
				if err != nil {
					errs <- err
					return
				}
				w.Enter("stock:42")
				time.Sleep(time.Millisecond)
				w.Exit("stock:42")
				if err := l.Unlock(ctx); err != nil {
					errs <- err
				}
			}
		}()
	}
	for range waiters {
		<-started
	}
	time.Sleep(firstHold) // the waiters queue behind the first holder
	w.Exit("stock:42")
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if o := w.Overlaps(); o != 0 {
		t.Fatalf("%d overlapping critical sections", o)
	}
	const n = waiters*rounds + 1
	if v := get(t, r.reg, "dlock_acquire_total", "shape", "mutex", "group", "stock", "result", "acquired").value; v != n {
		t.Fatalf("acquire_total{acquired} = %v, want %d", v, n)
	}
	h := get(t, r.reg, "dlock_acquire_wait_seconds", "shape", "mutex", "group", "stock")
	if h.count != n {
		t.Fatalf("wait histogram count = %d, want %d", h.count, n)
	}
	// Every waiter's first acquisition waited out most of the first hold
	// (the waiters had started before it began to run down).
	if slow := h.count - h.bucket[0.025]; slow < waiters {
		t.Fatalf("%d waits above 25ms, want >= %d (the first holder kept the lock %v); buckets %v", slow, waiters, firstHold, h.bucket)
	}
	if h.sum < float64(waiters)*0.025 {
		t.Fatalf("wait sum %.3fs, want >= %.3fs", h.sum, float64(waiters)*0.025)
	}
}

// A fixed 200 ms lease held 150 ms records a hold/lease ratio of about 0.75.
func TestHoldLeaseRatio(t *testing.T) {
	r := newRig(t, nil)
	ctx := testCtx(t)
	l, err := r.c.Mutex("coupon:9").Acquire(ctx, dlock.LeaseTime(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("unlock after 150ms of a 200ms lease: %v", err)
	}
	h := get(t, r.reg, "dlock_hold_lease_ratio", "shape", "mutex", "group", "coupon")
	if h.count != 1 {
		t.Fatalf("ratio count = %d, want 1", h.count)
	}
	// At least 150/200; below 1 since the unlock found the lease held.
	if h.sum < 0.75 || h.sum >= 1 {
		t.Fatalf("hold/lease ratio = %.3f, want ≈ 0.75 (in [0.75, 1))", h.sum)
	}
	hold := get(t, r.reg, "dlock_hold_seconds", "shape", "mutex", "group", "coupon")
	if hold.count != 1 || hold.sum < 0.15 {
		t.Fatalf("hold_seconds count %d sum %.3f, want 1 and >= 0.150", hold.count, hold.sum)
	}
	// A watchdog lease has no fixed lease: no ratio.
	l, err = r.c.Mutex("coupon:10").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if h := get(t, r.reg, "dlock_hold_lease_ratio", "shape", "mutex", "group", "coupon"); h.count != 1 {
		t.Fatalf("ratio count = %d after a watchdog lease, want still 1", h.count)
	}
}

// The held gauge follows reentrant Leases through release and loss.
func TestHeldGaugeReentrant(t *testing.T) {
	r := newRig(t, []dlock.Config{{TTL: 300 * time.Millisecond}})
	ctx := testCtx(t)
	held := func() float64 { return get(t, r.reg, "dlock_held_leases", "shape", "lock", "group", "order").value }
	lk := r.c.Lock("order:1")
	outer, err := lk.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := lk.Acquire(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v := held(); v != 2 {
		t.Fatalf("held = %v with outer and inner, want 2", v)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := held(); v != 1 {
		t.Fatalf("held = %v after inner unlock, want 1", v)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := held(); v != 0 {
		t.Fatalf("held = %v after outer unlock, want 0", v)
	}

	// Lost with two Leases on it: both end with the loss.
	outer, err = lk.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err = lk.Acquire(outer.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.rdb.Del(ctx, "dlock:{order:1}").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-outer.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("loss not detected")
	}
	// Done closes before the observer hears of the loss.
	r.waitLost(t, 1)
	if v := held(); v != 0 {
		t.Fatalf("held = %v after the loss of two Leases, want 0", v)
	}
	for _, l := range []*dlock.Lease{inner, outer} {
		if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("unlock = %v, want ErrLockLost", err)
		}
	}
	if v := held(); v != 0 {
		t.Fatalf("held = %v after unlocking the lost Leases, want 0", v)
	}
	if v := get(t, r.reg, "dlock_lost_total", "shape", "lock", "reason", "deleted_or_taken").value; v != 1 {
		t.Fatalf("lost = %v, want 1 (one hold)", v)
	}
	if v := get(t, r.reg, "dlock_unlock_found_lost_total", "shape", "lock").value; v != 2 {
		t.Fatalf("unlock_found_lost = %v, want 2 (two Unlocks)", v)
	}
}

// Watchdog renewals are counted, and the lease's renewals are observed once
// when it ends.
func TestRenewalsPerLease(t *testing.T) {
	// A 600 ms watchdog lease renews every 200 ms: long enough that a
	// loaded machine does not lose it between renewals.
	r := newRig(t, []dlock.Config{{TTL: 600 * time.Millisecond}})
	ctx := testCtx(t)
	l, err := r.c.Lock("report:2025").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	renewals := func() float64 { return get(t, r.reg, "dlock_renewals_total", "shape", "lock", "group", "report").value }
	eventually(t, 30*time.Second, "3 renewals", func() bool {
		if err := l.Err(); err != nil {
			t.Fatalf("lease lost before 3 renewals: %v", err)
		}
		return renewals() >= 3
	})
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	h := get(t, r.reg, "dlock_lease_renewals", "shape", "lock", "group", "report")
	if h.count != 1 || h.sum < 3 {
		t.Fatalf("lease_renewals count %d sum %v, want 1 and >= 3", h.count, h.sum)
	}
	// A renewal that succeeded just before the Unlock may reach the
	// observer just after it: wait for renewals_total to catch up with the
	// lease's count, never past it.
	eventually(t, 10*time.Second, "renewals_total = the lease's renewals", func() bool { return renewals() >= h.sum })
	if n := renewals(); h.sum != n {
		t.Fatalf("lease_renewals sum %v, want %v (renewals_total)", h.sum, n)
	}
	// A fixed lease is not a watchdog lease: nothing observed.
	l, err = r.c.Lock("report:2026").Acquire(ctx, dlock.LeaseTime(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if h := get(t, r.reg, "dlock_lease_renewals", "shape", "lock", "group", "report"); h.count != 1 {
		t.Fatalf("lease_renewals count %d after a fixed lease, want 1", h.count)
	}
}

// Acquire results other than acquired are counted by result.
func TestAcquireResults(t *testing.T) {
	r := newRig(t, nil)
	ctx := testCtx(t)
	l, err := r.c.Mutex("pay:1").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Unlock(ctx) }()
	// The incident counters of a (shape, group) exist, at 0, from its first
	// use, so that increase() in the alerts sees their first event.
	for _, kv := range [][]string{
		{"dlock_lost_total", "reason", "deleted_or_taken"}, {"dlock_lost_total", "reason", "expired"},
		{"dlock_lost_total", "reason", "unreachable"}, {"dlock_unlock_found_lost_total"}, {"dlock_slow_holds_total"},
	} {
		s := get(t, r.reg, kv[0], append([]string{"shape", "mutex", "group", "pay"}, kv[1:]...)...)
		if s.labels == nil || s.value != 0 {
			t.Fatalf("%v: %+v, want a series at 0", kv, s)
		}
	}
	if _, err := r.c.Mutex("pay:1").Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second acquire = %v, want ErrNotAcquired", err)
	}
	if err := r.rdb.HSet(ctx, "dlock:{pay:3}", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.Lock("pay:3").Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrWrongType) {
		t.Fatalf("acquire of a foreign hash = %v, want ErrWrongType", err)
	}
	for result, want := range map[string]float64{"acquired": 1, "not_acquired": 1} {
		if v := get(t, r.reg, "dlock_acquire_total", "shape", "mutex", "group", "pay", "result", result).value; v != want {
			t.Fatalf("acquire_total{mutex,%s} = %v, want %v", result, v, want)
		}
	}
	if v := get(t, r.reg, "dlock_acquire_total", "shape", "lock", "group", "pay", "result", "error").value; v != 1 {
		t.Fatalf("acquire_total{lock,error} = %v, want 1", v)
	}
	if h := get(t, r.reg, "dlock_acquire_wait_seconds", "shape", "mutex"); h.count != 1 {
		t.Fatalf("wait observations = %d, want 1 (acquired only)", h.count)
	}
}

// An Unlock whose release gets no reply (Redis paused: SIGSTOP) returns the
// store's error and the failed release is counted once; a release that
// succeeds is not counted.
func TestReleaseFailureCounted(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	r := newRigOn(t, rdb, nil)
	ctx := testCtx(t)
	ok, err := r.c.Mutex("order:1").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.Unlock(ctx); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if v := get(t, r.reg, "dlock_release_failures_total", "shape", "mutex", "group", "order").value; v != 0 {
		t.Fatalf("release_failures = %v after a release that succeeded, want 0", v)
	}
	l, err := r.c.Mutex("order:2").Acquire(ctx, dlock.Wait(0), dlock.LeaseTime(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var uerr error
	redistest.Paused(t, srv, func() {
		uctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		uerr = l.Unlock(uctx)
	})
	if uerr == nil || errors.Is(uerr, dlock.ErrLockLost) {
		t.Fatalf("unlock with Redis paused = %v, want the store's error", uerr)
	}
	if v := get(t, r.reg, "dlock_release_failures_total", "shape", "mutex", "group", "order").value; v != 1 {
		t.Fatalf("release_failures = %v after a failed release, want 1", v)
	}
}
