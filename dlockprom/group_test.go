package dlockprom_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/observe"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockprom"
	"github.com/prometheus/client_golang/prometheus"
)

// 10 000 distinct lock names, acquired and released on a real Redis, make
// one series per group, never one per name.
func TestTenThousandNamesBoundedSeries(t *testing.T) {
	r := newRig(t, nil)
	ctx := testCtx(t)
	const n = 10000
	names := make(chan string, n)
	for i := range n {
		switch i % 4 {
		case 0:
			names <- fmt.Sprintf("stock:%d", i)
		case 1:
			names <- fmt.Sprintf("order:%d:pay", i)
		case 2:
			names <- fmt.Sprintf("user:%08x:cart", i*2654435761)
		case 3:
			names <- fmt.Sprintf("%d", i)
		}
	}
	close(names)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range names {
				l, err := r.c.Mutex(name).Acquire(ctx, dlock.Wait(0), dlock.LeaseTime(10*time.Second))
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := []string{observe.NoGroup, "order", "stock", "user"}
	for _, metric := range []string{"dlock_acquire_total", "dlock_acquire_wait_seconds", "dlock_hold_seconds", "dlock_hold_lease_ratio",
		"dlock_held_leases", "dlock_lost_total", "dlock_unlock_found_lost_total", "dlock_slow_holds_total"} {
		if got := distinct(labelValues(gather(t, r.reg, metric), "group")); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("%s: groups %v, want %v", metric, got, want)
		}
	}
	sum := 0.0
	for _, s := range gather(t, r.reg, "dlock_acquire_total") {
		sum += s.value
	}
	if sum != n {
		t.Fatalf("acquire_total = %v, want %d", sum, n)
	}
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		series += len(mf.GetMetric())
	}
	// Per (shape, group): 3 acquire results, 4 loss reasons, 5 other
	// counters and gauges, 4 histograms.
	if limit := 16 * len(want); series > limit {
		t.Fatalf("%d series after %d names, want <= %d", series, n, limit)
	}
}

// Whatever the group function returns, at most WithMaxGroups values are used.
func TestMaxGroups(t *testing.T) {
	obs, err := dlockprom.New(dlockprom.WithGroup(func(name string) string { return name }), dlockprom.WithMaxGroups(50))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)
	for i := range 10000 {
		obs.ObserveAcquire(observe.AcquireEvent{Shape: "mutex", Name: fmt.Sprintf("word-%d", i), Result: observe.NotAcquired})
	}
	obs.ObserveAcquire(observe.AcquireEvent{Shape: "mutex", Name: "bad\xff\xfe", Result: observe.NotAcquired}) // invalid UTF-8
	if groups := distinct(labelValues(gather(t, reg, "dlock_acquire_total"), "group")); len(groups) != 51 {
		t.Fatalf("%d groups, want 51 (50 + %s)", len(groups), observe.OtherGroup)
	}
	if s := get(t, reg, "dlock_acquire_total", "group", observe.OtherGroup, "result", "not_acquired"); s.value != 10000-50+1 {
		t.Fatalf("%s = %v, want %d", observe.OtherGroup, s.value, 10000-50+1)
	}
}

func TestOptionErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		opt  dlockprom.Option
		want error
	}{
		"namespace":  {dlockprom.WithNamespace("1bad-name"), dlock.ErrInvalidArgument},
		"group":      {dlockprom.WithGroup(nil), dlock.ErrInvalidArgument},
		"max groups": {dlockprom.WithMaxGroups(0), dlock.ErrInvalidArgument},
		"slow hold":  {dlockprom.WithSlowHold(-time.Second), dlock.ErrInvalidDuration},
		"logger":     {dlockprom.WithLogger(nil), dlock.ErrInvalidArgument},
	} {
		if obs, err := dlockprom.New(tc.opt); !errors.Is(err, tc.want) || obs != nil {
			t.Errorf("%s: New = %v, %v; want nil, %v", name, obs, err, tc.want)
		}
	}
	obs, err := dlockprom.New(dlockprom.WithNamespace("shop_locks"))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)
	obs.ObserveAcquire(observe.AcquireEvent{Shape: "mutex", Name: "a:1", Result: observe.Acquired})
	if s := get(t, reg, "shop_locks_acquire_total", "group", "a", "result", "acquired"); s.value != 1 {
		t.Fatalf("namespaced counter = %v, want 1", s.value)
	}
}

// distinct returns the sorted distinct values of sorted xs.
func distinct(xs []string) []string {
	var out []string
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}
