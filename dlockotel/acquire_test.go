package dlockotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockotel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// An acquired and released Mutex and Lock: an acquire span, a child of the
// caller's span, with shape, backend and result; a second owner's refused
// attempt is a not_acquired span without error status; the Unlock records
// one hold span from the grant to the release with the fencing token; no
// span carries the lock name. The metrics count each call by result and
// each hold.
func TestAcquiredNotAcquiredReleased(t *testing.T) {
	r := newRig(t, dlock.Config{}, dlockotel.WithBackend("redis"))
	other := r.client(t, dlock.Config{})
	ctx := testCtx(t)
	tracer := r.tp.Tracer("test")
	for _, shape := range []string{"mutex", "lock"} {
		t.Run(shape, func(t *testing.T) {
			r.spans.Reset()
			lockers := map[string][2]dlock.Locker{
				"mutex": {r.c.Mutex("stock:1001"), other.Mutex("stock:1001")},
				"lock":  {r.c.Lock("stock:1002"), other.Lock("stock:1002")},
			}[shape]
			pctx, parent := tracer.Start(ctx, "checkout")
			before := time.Now()
			l, err := lockers[0].Acquire(pctx, dlock.Wait(0))
			if err != nil {
				t.Fatalf("acquire: %v", err)
			}
			took := time.Since(before)
			if _, err := lockers[1].Acquire(pctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("second owner's acquire = %v, want ErrNotAcquired", err)
			}
			acq := r.ended("dlock.acquire")
			if len(acq) != 2 {
				t.Fatalf("%d acquire spans, want 2: %v", len(acq), describe(r.spans.Ended()))
			}
			got, refused := acq[0], acq[1]
			for _, s := range acq {
				childOf(t, s, parent.SpanContext())
				if s.SpanKind() != trace.SpanKindInternal {
					t.Errorf("acquire span kind %v, want internal", s.SpanKind())
				}
				noAttrs(t, s, "dlock.lock.name", "dlock.lock.group", "error.type")
			}
			wantAttrs(t, got, map[string]any{"dlock.lock.shape": shape, "dlock.backend": "redis", "dlock.acquire.result": "acquired", "dlock.lock.token": l.Token()})
			wantStatus(t, got, codes.Unset)
			wantAttrs(t, refused, map[string]any{"dlock.lock.shape": shape, "dlock.acquire.result": "not_acquired"})
			noAttrs(t, refused, "dlock.lock.token")
			wantStatus(t, refused, codes.Unset)
			if v, _ := attr(got, "dlock.acquire.wait"); v.AsFloat64() <= 0 || v.AsFloat64() > took.Seconds() {
				t.Errorf("dlock.acquire.wait = %v s, want in (0, %v]", v.AsFloat64(), took.Seconds())
			}

			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("unlock: %v", err)
			}
			unlocked := time.Now()
			hold := r.one(t, "dlock.hold")
			wantAttrs(t, hold, map[string]any{"dlock.lock.shape": shape, "dlock.backend": "redis",
				"dlock.lock.token": l.Token(), "dlock.hold.renewals": 0})
			noAttrs(t, hold, "dlock.lock.name", "dlock.hold.lease") // a watchdog lease has no fixed lease
			wantStatus(t, hold, codes.Unset)
			if len(hold.Events()) != 0 {
				t.Errorf("hold span events %v, want none", hold.Events())
			}
			if hold.Parent().IsValid() {
				t.Errorf("hold span has parent %v, want a root span", hold.Parent())
			}
			// The hold starts at the grant, inside the acquire call, and ends
			// at the release.
			const slack = 2 * time.Millisecond
			if hold.StartTime().Before(got.StartTime().Add(-slack)) || hold.StartTime().After(got.EndTime().Add(slack)) {
				t.Errorf("hold started at %v, outside the acquire call [%v, %v]", hold.StartTime(), got.StartTime(), got.EndTime())
			}
			if hold.EndTime().Before(got.EndTime()) || hold.EndTime().After(unlocked.Add(slack)) {
				t.Errorf("hold ended at %v, want between the acquire's end %v and the unlock's return %v", hold.EndTime(), got.EndTime(), unlocked)
			}
			parent.End()

			r.wantHist(t, 1, "dlock.acquire.duration", "dlock.lock.shape", shape, "dlock.acquire.result", "acquired", "dlock.backend", "redis")
			r.wantHist(t, 1, "dlock.acquire.duration", "dlock.lock.shape", shape, "dlock.acquire.result", "not_acquired")
			r.wantHist(t, 1, "dlock.hold.duration", "dlock.lock.shape", shape)
			r.wantHist(t, 1, "dlock.renewals_per_lease", "dlock.lock.shape", shape)
			r.wantCount(t, 0, "dlock.lost_holds", "dlock.lock.shape", shape, "dlock.loss.reason", "expired")
			r.wantCount(t, 0, "dlock.lost_unlocks", "dlock.lock.shape", shape)
			r.wantCount(t, 0, "dlock.slow_holds", "dlock.lock.shape", shape)
		})
	}
}

// wantHist fails the test unless histogram name has count want over the
// data points with attributes kv.
func (r *rig) wantHist(t *testing.T, want uint64, name string, kv ...string) {
	t.Helper()
	if got, _ := r.hist(t, name, kv...); got != want {
		t.Errorf("%s%v count = %d, want %d", name, kv, got, want)
	}
}

// Failed Acquire calls: error status with the error's message and a
// bounded error.type (closed, invalid_argument, deadline_exceeded), counted
// in dlock.acquire.duration with result error.
func TestAcquireErrors(t *testing.T) {
	r := newRig(t, dlock.Config{})
	ctx := testCtx(t)

	if _, err := r.c.Mutex("").Acquire(ctx); !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf("acquire of \"\" = %v, want ErrInvalidName", err)
	}
	// A wait cut short by the caller's deadline, on a lock someone holds.
	other := r.client(t, dlock.Config{})
	held, err := other.Mutex("stock:9").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = r.c.Mutex("stock:9").Acquire(short, dlock.Wait(10*time.Second))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire past its deadline = %v, want DeadlineExceeded", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Close(); err != nil {
		t.Fatal(err)
	}
	_, closedErr := r.c.Mutex("stock:9").Acquire(ctx)
	if !errors.Is(closedErr, dlock.ErrClosed) {
		t.Fatalf("acquire on a closed client = %v, want ErrClosed", closedErr)
	}

	var failed []string
	for _, s := range r.ended("dlock.acquire") {
		if v, _ := attr(s, "dlock.acquire.result"); v.AsString() != "error" {
			continue
		}
		wantStatus(t, s, codes.Error)
		et, _ := attr(s, "error.type")
		failed = append(failed, et.AsString())
		if s.Status().Description == "" {
			t.Errorf("error span %v has no status description", et.AsString())
		}
	}
	want := []string{"invalid_argument", "deadline_exceeded", "closed"}
	if len(failed) != len(want) {
		t.Fatalf("error spans with error.type %v, want %v", failed, want)
	}
	for i := range want {
		if failed[i] != want[i] {
			t.Errorf("error spans with error.type %v, want %v", failed, want)
		}
	}
	// The status names the error's type, never the lock (the error's own
	// text does: names are the user's to allow, see WithLockNames).
	if s := r.ended("dlock.acquire")[len(r.ended("dlock.acquire"))-1]; s.Status().Description != "acquire failed: closed" || strings.Contains(s.Status().Description, "stock:9") {
		t.Errorf("closed span status %q, want %q (the error was %q)", s.Status().Description, "acquire failed: closed", closedErr.Error())
	}
	for _, et := range want {
		r.wantHist(t, 1, "dlock.acquire.duration", "dlock.acquire.result", "error", "error.type", et)
	}
	// The refused wait took its 100 ms.
	if _, sum := r.hist(t, "dlock.acquire.duration", "error.type", "deadline_exceeded"); sum < 0.09 || sum > 5 {
		t.Errorf("the deadline-cut acquire took %v s, want about 0.1", sum)
	}
}

// A Semaphore's AcquireN(k) is one Acquire call (one acquire span, one
// acquisition counted) granting k holds, each with its own token: k hold
// spans. (So the events cannot keep a held-leases gauge: see the package
// doc.)
func TestSemaphoreAcquireN(t *testing.T) {
	r := newRig(t, dlock.Config{})
	ctx := testCtx(t)
	ls, err := r.c.Semaphore("pool:db", 5).AcquireN(ctx, 3, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	acq := r.one(t, "dlock.acquire")
	wantAttrs(t, acq, map[string]any{"dlock.lock.shape": "semaphore", "dlock.acquire.result": "acquired"})
	tokens := map[int64]bool{}
	for _, l := range ls {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		tokens[l.Token()] = true
	}
	holds := r.ended("dlock.hold")
	if len(holds) != 3 || len(tokens) != 3 {
		t.Fatalf("%d hold spans, %d distinct tokens; want 3 each", len(holds), len(tokens))
	}
	for _, h := range holds {
		v, _ := attr(h, "dlock.lock.token")
		if !tokens[v.AsInt64()] {
			t.Errorf("hold span token %d is none of the Leases' %v", v.AsInt64(), tokens)
		}
	}
	r.wantHist(t, 1, "dlock.acquire.duration", "dlock.lock.shape", "semaphore")
	r.wantHist(t, 3, "dlock.hold.duration", "dlock.lock.shape", "semaphore")
}
