package dlockprom_test

import (
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockprom"
)

const slowMsg = "dlock: slow hold"

// A watchdog hold past the threshold is reported once, while still held,
// with its name, token and holder; more renewals do not repeat it.
func TestSlowHoldWarnedWhileHeld(t *testing.T) {
	// A 600 ms watchdog lease renews every 200 ms: a loaded machine does not
	// lose it between renewals.
	r := newRig(t, []dlock.Config{{TTL: 600 * time.Millisecond}},
		dlockprom.WithSlowHold(250*time.Millisecond))
	ctx := testCtx(t)
	l, err := r.c.Lock("stock:1001").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slow := func() float64 {
		return get(t, r.reg, "dlock_slow_holds_total", "shape", "lock", "group", "stock").value
	}
	// The warning is the report's last step (after the counter): wait for it.
	eventually(t, 30*time.Second, "a slow-hold warning", func() bool { return len(r.log.records(t, slowMsg)) == 1 })
	if v := slow(); v != 1 {
		t.Fatalf("slow_holds_total = %v after the warning, want 1", v)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost: %v", err)
	}
	recs := r.log.records(t, slowMsg)
	if len(recs) != 1 {
		t.Fatalf("%d slow-hold warnings, want 1: %v", len(recs), recs)
	}
	rec := recs[0]
	if rec["level"] != "WARN" || rec["name"] != "stock:1001" || rec["shape"] != "lock" || rec["group"] != "stock" ||
		rec["state"] != "held" || rec["token"] != float64(l.Token()) || rec["host"] == "" || rec["pid"] == nil {
		t.Fatalf("warning %v: want WARN, name stock:1001, shape lock, group stock, state held, token %d, host and pid", rec, l.Token())
	}
	if held, _ := rec["held"].(float64); time.Duration(held) < 250*time.Millisecond {
		t.Fatalf("warning held = %v, want >= 250ms", time.Duration(held))
	}
	renewals := func() float64 { return get(t, r.reg, "dlock_renewals_total", "shape", "lock").value }
	after := renewals()
	eventually(t, 30*time.Second, "3 more renewals", func() bool {
		if err := l.Err(); err != nil {
			t.Fatalf("lease lost before 3 more renewals: %v", err)
		}
		return renewals() >= after+3
	})
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(r.log.records(t, slowMsg)); n != 1 || slow() != 1 {
		t.Fatalf("%d warnings, slow_holds_total %v after more renewals and unlock; want 1 and 1", n, slow())
	}
	// The next hold of the same lock is a new hold.
	l, err = r.c.Lock("stock:1001").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a second slow-hold report", func() bool { return slow() == 2 })
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A fixed lease has no renewals: it is reported when its hold ends, once
// (also for a reentrant hold), and a short hold is not reported.
func TestSlowHoldFixedLease(t *testing.T) {
	r := newRig(t, nil, dlockprom.WithSlowHold(100*time.Millisecond))
	ctx := testCtx(t)
	slow := func() float64 {
		return get(t, r.reg, "dlock_slow_holds_total", "shape", "lock", "group", "order").value
	}

	l, err := r.c.Lock("order:1").Acquire(ctx, dlock.LeaseTime(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := slow(); v != 0 {
		t.Fatalf("a short hold was reported slow (%v)", v)
	}

	outer, err := r.c.Lock("order:1").Acquire(ctx, dlock.LeaseTime(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := r.c.Lock("order:1").Acquire(outer.Context(), dlock.LeaseTime(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(150 * time.Millisecond)
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := slow(); v != 0 {
		t.Fatalf("reported at the inner unlock (%v), want at the end of the hold", v)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	recs := r.log.records(t, slowMsg)
	if slow() != 1 || len(recs) != 1 || recs[0]["state"] != "released" || recs[0]["token"] != float64(outer.Token()) {
		t.Fatalf("slow_holds_total %v, warnings %v; want 1 warning, state released, token %d", slow(), recs, outer.Token())
	}
}

// A fixed lease that runs out past the threshold is reported once, as lost;
// its later Unlock reports nothing more.
func TestSlowHoldLost(t *testing.T) {
	r := newRig(t, nil, dlockprom.WithSlowHold(100*time.Millisecond))
	ctx := testCtx(t)
	// The lease is 4× the threshold: the hold counts from when the grant
	// reached the client, which a loaded machine may delay by tens of ms.
	l, err := r.c.Mutex("pay:5").Acquire(ctx, dlock.LeaseTime(400*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("fixed lease did not run out")
	}
	r.waitLost(t, 1)
	if err := l.Unlock(ctx); err == nil {
		t.Fatal("unlock of an expired lease succeeded")
	}
	recs := r.log.records(t, slowMsg)
	if len(recs) != 1 || recs[0]["state"] != "lost" {
		t.Fatalf("warnings %v, want one with state lost", recs)
	}
	if v := get(t, r.reg, "dlock_slow_holds_total", "shape", "mutex").value; v != 1 {
		t.Fatalf("slow_holds_total = %v, want 1", v)
	}
	if v := get(t, r.reg, "dlock_lost_total", "shape", "mutex", "reason", "expired").value; v != 1 {
		t.Fatalf("lost{expired} = %v, want 1", v)
	}
}

// WithSlowHold(0) turns the reports off.
func TestSlowHoldOff(t *testing.T) {
	r := newRig(t, nil, dlockprom.WithSlowHold(0))
	ctx := testCtx(t)
	l, err := r.c.Mutex("pay:6").Acquire(ctx, dlock.LeaseTime(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(r.log.records(t, slowMsg)); n != 0 {
		t.Fatalf("%d warnings with slow-hold reports off", n)
	}
	if v := total(t, r.reg, "dlock_slow_holds_total"); v != 0 {
		t.Fatalf("slow_holds_total = %v, want 0", v)
	}
}
