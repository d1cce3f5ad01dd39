package dlockotel_test

import (
	"testing"
	"time"

	"github.com/dlockgo/dlock/dlockotel"
	"github.com/dlockgo/dlock/observe"
	"go.opentelemetry.io/otel/codes"
)

// A backend that reports its Acquire calls with ObserveAcquire (it does
// not bracket them with StartAcquire) still gets an acquire span: a root
// span from the call's start (now - Wait) to its end.
func TestObserveAcquireWithoutBracket(t *testing.T) {
	r := newRecorder(t, dlockotel.WithBackend("etcd"))
	before := time.Now()
	r.obs.ObserveAcquire(observe.AcquireEvent{Shape: "mutex", Name: "a", Result: observe.Acquired, Wait: 40 * time.Millisecond})
	after := time.Now()
	s := r.one(t, "dlock.acquire")
	if s.Parent().IsValid() {
		t.Errorf("parent %v, want a root span", s.Parent())
	}
	if d := s.EndTime().Sub(s.StartTime()); d < 40*time.Millisecond || d > 40*time.Millisecond+after.Sub(before) {
		t.Errorf("span lasted %v, want the 40 ms wait", d)
	}
	wantAttrs(t, s, map[string]any{"dlock.backend": "etcd", "dlock.lock.shape": "mutex", "dlock.acquire.result": "acquired", "dlock.acquire.wait": 0.04})
	wantStatus(t, s, codes.Unset)
	r.wantHist(t, 1, "dlock.acquire.duration", "dlock.acquire.result", "acquired", "dlock.backend", "etcd")
}

// WithSlowHold(0) counts no slow hold, however long.
func TestSlowHoldsOff(t *testing.T) {
	r := newRecorder(t, dlockotel.WithSlowHold(0))
	r.obs.ObserveRenewal(observe.RenewalEvent{Shape: "mutex", Name: "a", Token: 1, OK: true, Held: time.Hour, Renewals: 1})
	r.obs.ObserveRelease(observe.ReleaseEvent{Shape: "mutex", Name: "a", Token: 1, Held: 2 * time.Hour, Renewals: 1, Last: true})
	r.wantCount(t, 0, "dlock.slow_holds")
	r.wantCount(t, 1, "dlock.renewals", "dlock.renewal.result", "renewed")
}
