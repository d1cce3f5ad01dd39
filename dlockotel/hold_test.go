package dlockotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockotel"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// wantLost fails the test unless hold is the span of a hold lost for
// reason: error status naming the reason, one dlock.hold.lost event at the
// span's end carrying it.
func wantLost(t *testing.T, hold sdktrace.ReadOnlySpan, reason string) {
	t.Helper()
	wantStatus(t, hold, codes.Error)
	if want := "lock lost (" + reason + ")"; hold.Status().Description != want {
		t.Errorf("hold status %q, want %q", hold.Status().Description, want)
	}
	evs := hold.Events()
	if len(evs) != 1 || evs[0].Name != "dlock.hold.lost" {
		t.Fatalf("hold events %v, want one dlock.hold.lost", evs)
	}
	if !evs[0].Time.Equal(hold.EndTime()) {
		t.Errorf("loss event at %v, span end %v: want the loss to end the span", evs[0].Time, hold.EndTime())
	}
	var got string
	for _, kv := range evs[0].Attributes {
		if kv.Key == "dlock.loss.reason" {
			got = kv.Value.AsString()
		}
	}
	if got != reason {
		t.Errorf("loss event reason %q (attributes %v), want %q", got, evs[0].Attributes, reason)
	}
}

// A fixed lease that runs out: the hold span ends at the loss (expired),
// with the fixed lease and the token; the later Unlock records no second
// hold span and counts an unlock that found the lock lost.
func TestLostExpired(t *testing.T) {
	r := newRig(t, dlock.Config{})
	ctx := testCtx(t)
	before := time.Now()
	l, err := r.c.Mutex("stock:1").Acquire(ctx, dlock.Wait(0), dlock.LeaseTime(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(before)
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the fixed lease did not run out")
	}
	r.waitLost(t, 1)
	hold := r.one(t, "dlock.hold")
	wantLost(t, hold, "expired")
	wantAttrs(t, hold, map[string]any{"dlock.lock.token": l.Token(), "dlock.hold.lease": 0.1, "dlock.lock.shape": "mutex"})
	// The lease runs from the request (minus the client's drift, 3 ms); the
	// hold from the grant's arrival, at most took later.
	if d := hold.EndTime().Sub(hold.StartTime()); d < 97*time.Millisecond-took-time.Millisecond || d > time.Since(before) {
		t.Errorf("hold span lasted %v (the acquire took %v), want the 100 ms lease less the drift and at most that", d, took)
	}
	r.wantCount(t, 1, "dlock.lost_holds", "dlock.loss.reason", "expired", "dlock.lock.shape", "mutex")
	r.wantCount(t, 0, "dlock.lost_holds", "dlock.loss.reason", "deleted_or_taken")

	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("unlock after expiry = %v, want ErrLockLost", err)
	}
	if n := len(r.ended("dlock.hold")); n != 1 {
		t.Errorf("%d hold spans after the late Unlock, want 1", n)
	}
	r.wantCount(t, 1, "dlock.lost_unlocks", "dlock.lock.shape", "mutex")
	r.wantHist(t, 1, "dlock.hold.duration")
	r.wantHist(t, 1, "dlock.hold.lease_utilization")
	// A fixed lease is not a watchdog lease: no renewals-per-lease sample.
	r.wantHist(t, 0, "dlock.renewals_per_lease")
}

// A key deleted under a held Mutex and Lock, found by Unlock: one hold
// span, lost (deleted_or_taken), one loss and one lost unlock counted.
func TestLostDeletedFoundByUnlock(t *testing.T) {
	r := newRig(t, dlock.Config{})
	ctx := testCtx(t)
	for _, shape := range []string{"mutex", "lock"} {
		r.spans.Reset()
		var lk dlock.Locker = r.c.Mutex("stock:" + shape)
		if shape == "lock" {
			lk = r.c.Lock("stock:" + shape)
		}
		l, err := lk.Acquire(ctx, dlock.Wait(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := r.rdb.Del(ctx, "dlock:{"+lk.Name()+"}").Err(); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("%s: unlock after DEL = %v, want ErrLockLost", shape, err)
		}
		hold := r.one(t, "dlock.hold")
		wantLost(t, hold, "deleted_or_taken")
		wantAttrs(t, hold, map[string]any{"dlock.lock.shape": shape, "dlock.lock.token": l.Token()})
		r.wantCount(t, 1, "dlock.lost_holds", "dlock.lock.shape", shape, "dlock.loss.reason", "deleted_or_taken")
		r.wantCount(t, 1, "dlock.lost_unlocks", "dlock.lock.shape", shape)
	}
}

// The watchdog finds the deleted key: the hold span ends at that loss,
// before any Unlock.
func TestLostDeletedFoundByWatchdog(t *testing.T) {
	r := newRig(t, dlock.Config{TTL: 300 * time.Millisecond})
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
	r.waitLost(t, 1)
	wantLost(t, r.one(t, "dlock.hold"), "deleted_or_taken")
	r.wantCount(t, 1, "dlock.lost_holds", "dlock.loss.reason", "deleted_or_taken")
	r.wantCount(t, 0, "dlock.lost_unlocks")
	r.wantHist(t, 1, "dlock.renewals_per_lease") // the watchdog Lease ended by its loss
	_ = l.Unlock(ctx)
	r.wantCount(t, 1, "dlock.lost_unlocks")
	if n := len(r.ended("dlock.hold")); n != 1 {
		t.Errorf("%d hold spans after the Unlock, want 1", n)
	}
}

// MaxHold: a watchdog lease held past its cap is lost with max_hold; a
// Client closed under a held lock loses it with closed.
func TestLostMaxHoldAndClosed(t *testing.T) {
	r := newRig(t, dlock.Config{TTL: 300 * time.Millisecond})
	ctx := testCtx(t)
	l, err := r.c.Mutex("stock:cap").Acquire(ctx, dlock.Wait(0), dlock.MaxHold(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("MaxHold did not end the lease")
	}
	r.waitLost(t, 1)
	wantLost(t, r.one(t, "dlock.hold"), "max_hold")
	r.wantCount(t, 1, "dlock.lost_holds", "dlock.loss.reason", "max_hold")

	r.spans.Reset()
	c := r.client(t, dlock.Config{})
	l2, err := c.Lock("stock:closed").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	r.waitLost(t, 2)
	hold := r.one(t, "dlock.hold")
	wantLost(t, hold, "closed")
	wantAttrs(t, hold, map[string]any{"dlock.lock.shape": "lock", "dlock.lock.token": l2.Token()})
	r.wantCount(t, 1, "dlock.lost_holds", "dlock.loss.reason", "closed", "dlock.lock.shape", "lock")
}

// A reentrant Lock entered twice by one owner is one hold: two acquire
// spans, one hold span, recorded by the last Unlock only; every Unlock is
// a hold-duration sample.
func TestReentrantOneHold(t *testing.T) {
	r := newRig(t, dlock.Config{})
	ctx := testCtx(t)
	lk := r.c.Lock("stock:re")
	outer, err := lk.Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := lk.Acquire(outer.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if inner.Token() != outer.Token() {
		t.Fatalf("re-entry token %d, outer %d: want one hold", inner.Token(), outer.Token())
	}
	if n := len(r.ended("dlock.acquire")); n != 2 {
		t.Fatalf("%d acquire spans, want 2", n)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(r.ended("dlock.hold")); n != 0 {
		t.Fatalf("%d hold spans while the outer Lease holds, want 0", n)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wantAttrs(t, r.one(t, "dlock.hold"), map[string]any{"dlock.lock.token": outer.Token()})
	wantStatus(t, r.one(t, "dlock.hold"), codes.Unset)
	r.wantHist(t, 2, "dlock.hold.duration")
	r.wantHist(t, 2, "dlock.acquire.duration", "dlock.acquire.result", "acquired")
}

// The watchdog's renewals: counted as renewed, carried by the hold span
// (dlock.hold.renewals) and by renewals-per-lease; a hold renewed past the
// slow-hold threshold is counted slow once, while it is held.
func TestRenewalsAndSlowHolds(t *testing.T) {
	r := newRig(t, dlock.Config{TTL: 300 * time.Millisecond}, dlockotel.WithSlowHold(250*time.Millisecond))
	ctx := testCtx(t)
	l, err := r.c.Mutex("stock:slow").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	// Wait for a renewal past the threshold (the watchdog renews every
	// 100 ms): the slow hold is counted while still held.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, _ := r.count(t, "dlock.slow_holds"); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hold renewed past the slow-hold threshold was not counted slow")
		}
		time.Sleep(10 * time.Millisecond)
	}
	renewed, _ := r.count(t, "dlock.renewals", "dlock.renewal.result", "renewed")
	if renewed < 2 {
		t.Errorf("%d renewals counted past 250 ms at a 100 ms period, want >= 2", renewed)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r.wantCount(t, 1, "dlock.slow_holds") // once per hold: not again at its Unlock
	if n, _ := r.count(t, "dlock.renewals", "dlock.renewal.result", "failed"); n != 0 {
		t.Errorf("%d failed renewals counted, want 0", n)
	}
	hold := r.one(t, "dlock.hold")
	v, _ := attr(hold, "dlock.hold.renewals")
	total, _ := r.count(t, "dlock.renewals", "dlock.renewal.result", "renewed")
	if v.AsInt64() != total || total < renewed {
		t.Errorf("hold span renewals %d, counted %d: want equal", v.AsInt64(), total)
	}
	if _, sum := r.hist(t, "dlock.renewals_per_lease"); int64(sum) != total {
		t.Errorf("renewals per lease sum %v, want %d", sum, total)
	}

	// A fixed lease held past the threshold is counted slow when it ends.
	l2, err := r.c.Mutex("stock:slow2").Acquire(ctx, dlock.Wait(0), dlock.LeaseTime(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the hold itself: longer than the threshold
	r.wantCount(t, 1, "dlock.slow_holds")
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r.wantCount(t, 2, "dlock.slow_holds")
}

// An Unlock whose release gets no reply (Redis paused: SIGSTOP) returns the
// store's error and is counted in dlock.release_failures; a release that
// succeeds is not.
func TestReleaseFailure(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	r := newRigOn(t, rdb, dlock.Config{})
	ctx := testCtx(t)
	ok, err := r.c.Mutex("order:1").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := ok.Unlock(ctx); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	r.wantCount(t, 0, "dlock.release_failures", "dlock.lock.shape", "mutex")
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
	r.wantCount(t, 1, "dlock.release_failures", "dlock.lock.shape", "mutex")
	r.wantCount(t, 0, "dlock.lost_unlocks", "dlock.lock.shape", "mutex")
}
