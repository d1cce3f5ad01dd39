package dlockotel_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockotel"
	"github.com/dlockgo/dlock/observe"
)

// WithLockNames puts the name on spans, never on metrics; WithGroup puts
// the group on both, bounded by WithMaxGroups.
func TestNamesAndGroups(t *testing.T) {
	group := func(name string) string { return strings.SplitN(name, ":", 2)[0] }
	r := newRig(t, dlock.Config{}, dlockotel.WithBackend("redis"),
		dlockotel.WithLockNames(), dlockotel.WithGroup(group), dlockotel.WithMaxGroups(2))
	ctx := testCtx(t)
	for _, name := range []string{"stock:1", "order:2", "user:3", "user:4"} {
		l, err := r.c.Mutex(name).Acquire(ctx, dlock.Wait(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	acq, holds := r.ended("dlock.acquire"), r.ended("dlock.hold")
	if len(acq) != 4 || len(holds) != 4 {
		t.Fatalf("%d acquire and %d hold spans, want 4 each", len(acq), len(holds))
	}
	wantGroup := []string{"stock", "order", observe.OtherGroup, observe.OtherGroup}
	for i, name := range []string{"stock:1", "order:2", "user:3", "user:4"} {
		wantAttrs(t, acq[i], map[string]any{"dlock.lock.name": name, "dlock.lock.group": wantGroup[i]})
		wantAttrs(t, holds[i], map[string]any{"dlock.lock.name": name, "dlock.lock.group": wantGroup[i]})
	}
	for _, m := range []string{"dlock.acquire.duration", "dlock.hold.duration", "dlock.lost_holds", "dlock.lost_unlocks", "dlock.slow_holds"} {
		keys := r.attrKeys(t, m)
		if keys["dlock.lock.name"] {
			t.Errorf("metric %s carries dlock.lock.name", m)
		}
		if !keys["dlock.lock.group"] || !keys["dlock.lock.shape"] || !keys["dlock.backend"] {
			t.Errorf("metric %s has attributes %v, want dlock.lock.group, dlock.lock.shape, dlock.backend", m, keys)
		}
	}
	r.wantHist(t, 1, "dlock.acquire.duration", "dlock.lock.group", "stock")
	r.wantHist(t, 2, "dlock.acquire.duration", "dlock.lock.group", observe.OtherGroup)
}

// Without WithLockNames and WithGroup, nothing derived from the name is
// recorded anywhere; without WithBackend there is no dlock.backend.
func TestNoNamesByDefault(t *testing.T) {
	r := newRig(t, dlock.Config{})
	ctx := testCtx(t)
	l, err := r.c.Mutex("user:alice@example.com").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(r.spans.Ended()); n != 2 {
		t.Fatalf("%d spans, want an acquire and a hold span", n)
	}
	for _, s := range r.spans.Ended() {
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.Emit(), "alice") {
				t.Errorf("span %s carries the name in %s", s.Name(), kv.Key)
			}
		}
		noAttrs(t, s, "dlock.lock.name", "dlock.lock.group", "dlock.backend")
	}
	for _, m := range []string{"dlock.acquire.duration", "dlock.hold.duration", "dlock.lost_holds"} {
		keys := r.attrKeys(t, m)
		if keys["dlock.lock.name"] || keys["dlock.lock.group"] || keys["dlock.backend"] || !keys["dlock.lock.shape"] {
			t.Errorf("metric %s has attributes %v, want dlock.lock.shape (and dlock.loss.reason) only", m, keys)
		}
	}
}

// Bad options: an error wrapping the sentinel, and no Observer.
func TestBadOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		opt  dlockotel.Option
		want error
	}{
		"nil tracer provider": {dlockotel.WithTracerProvider(nil), dlock.ErrInvalidArgument},
		"nil meter provider":  {dlockotel.WithMeterProvider(nil), dlock.ErrInvalidArgument},
		"empty backend":       {dlockotel.WithBackend(""), dlock.ErrInvalidArgument},
		"long backend":        {dlockotel.WithBackend(strings.Repeat("x", 65)), dlock.ErrInvalidArgument},
		"bad utf-8 backend":   {dlockotel.WithBackend("\xff"), dlock.ErrInvalidArgument},
		"nil group":           {dlockotel.WithGroup(nil), dlock.ErrInvalidArgument},
		"zero max groups":     {dlockotel.WithMaxGroups(0), dlock.ErrInvalidArgument},
		"negative slow hold":  {dlockotel.WithSlowHold(-1), dlock.ErrInvalidDuration},
	} {
		o, err := dlockotel.New(tc.opt)
		if !errors.Is(err, tc.want) || o != nil {
			t.Errorf("%s: New = %v, %v; want nil and an error wrapping %v", name, o, err, tc.want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "dlock: new opentelemetry observer: ") {
			t.Errorf("%s: error %q does not start with dlock: new opentelemetry observer: ", name, err)
		}
	}
	if o, err := dlockotel.New(nil, dlockotel.WithSlowHold(0)); err != nil || o == nil {
		t.Errorf("New(nil option, slow holds off) = %v, %v; want an Observer", o, err)
	}
}
