package drill

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/observe"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/errline"
)

// LeaseResult is what the lease drill (000 §3.5) measured. Times are from
// the first holder's acquire.
type LeaseResult struct {
	Backend               string  `json:"backend"`
	LeaseMS               float64 `json:"lease_ms"`
	WorkMS                float64 `json:"work_ms"`
	SecondHolderEnteredMS float64 `json:"second_holder_entered_ms"`
	// BothInsideMS is how long A and B were both inside under the fixed
	// lease, from the spans (0: B entered after A left).
	BothInsideMS        float64 `json:"both_inside_ms"`
	FirstNotifiedLostMS float64 `json:"first_notified_lost_ms"`
	FirstUnlockError    string  `json:"first_unlock_error"`
	WatchdogLockLivedMS float64 `json:"watchdog_lock_lived_ms"`
	WatchdogIntervalMS  float64 `json:"watchdog_interval_ms"`
	Renewals            int64   `json:"renewals"`
	Fixed               []Event `json:"fixed_lease_timeline"`
	Watchdog            []Event `json:"watchdog_timeline"`
	history
	watchdogFromMS float64 // when the watchdog part began
}

// Lease runs 000 §3.5's experiment: a fixed lease shorter than the work
// (when does the second holder get in, and when does the first learn it lost
// the lock?), then the same work under the watchdog with its timeout set to
// the lease (how long does the lock live, and how many renewals keep it?).
func Lease(ctx context.Context, b *backend.Backend, lease, work time.Duration) (*LeaseResult, error) {
	if lease <= 0 || work <= 0 {
		return nil, errors.New("lease and work must be positive")
	}
	res := &LeaseResult{Backend: b.Kind, LeaseMS: msf(lease), WorkMS: msf(work), WatchdogIntervalMS: msf(lease / 3)}
	name := "drill:lease:" + randomID()

	// Fixed lease.
	var renewals renewalCounter
	ca, err := b.NewClient(ctx, backend.ClientOptions{Label: "A", Session: lease, Observer: &renewals})
	if err != nil {
		return nil, err
	}
	defer ca.Close()
	cb, err := b.NewClient(ctx, backend.ClientOptions{Label: "B"})
	if err != nil {
		return nil, err
	}
	defer cb.Close()

	tl := NewTimeline()
	la, err := ca.Lock(name).Acquire(ctx, dlock.LeaseTime(lease), dlock.Wait(0))
	if err != nil {
		return nil, fmt.Errorf("A: %w", err)
	}
	spanA := tl.Enter(fixedLane, "A", fmt.Sprintf("acquired with a fixed lease of %v; starts %v of work", lease, work))
	entered := make(chan error, 1)
	go func() {
		lb, err := cb.Lock(name).Acquire(ctx, dlock.Wait(work+lease))
		if err == nil {
			span := tl.Enter(fixedLane, "B", "acquired")
			_ = sleep(ctx, lease/5) // B's own (short) work
			tl.End(span)
			_ = lb.Unlock(context.WithoutCancel(ctx))
		}
		entered <- err
	}()
	select {
	case <-la.Done():
		at := tl.Add("A", "told: lock lost (lease context cancelled), work not finished")
		res.FirstNotifiedLostMS = msf(at)
		tl.Point(fixedLane, "A", "told: lock lost", at)
	case <-time.After(work):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := sleep(ctx, work-tl.Since()); err != nil && ctx.Err() != nil {
		return nil, err
	}
	tl.End(spanA)
	uerr := la.Unlock(context.WithoutCancel(ctx))
	if uerr != nil {
		res.FirstUnlockError = uerr.Error()
	}
	tl.Point(fixedLane, "A", "work done, Unlock: lost", tl.Add("A", fmt.Sprintf("work done, Unlock: %v", errText(uerr))))
	if err := <-entered; err != nil {
		return nil, fmt.Errorf("B: %w", err)
	}
	res.Fixed = tl.Events()

	// Watchdog.
	name += ":wd"
	mark := len(tl.Events())
	t0 := tl.Since()
	res.watchdogFromMS = msf(t0)
	la, err = ca.Lock(name).Acquire(ctx, dlock.Wait(0))
	if err != nil {
		return nil, fmt.Errorf("A (watchdog): %w", err)
	}
	spanA = tl.Enter(wdLane, "A", fmt.Sprintf("acquired, watchdog timeout %v (renewal every %v); starts %v of work", lease, (lease/3).Round(time.Millisecond), work))
	before := renewals.n.Load()
	go func() {
		lb, err := cb.Lock(name).Acquire(ctx, dlock.Wait(2*work+lease))
		if err == nil {
			span := tl.Enter(wdLane, "B", "acquired")
			_ = sleep(ctx, lease/5)
			tl.End(span)
			_ = lb.Unlock(context.WithoutCancel(ctx))
		}
		entered <- err
	}()
	if err := sleep(ctx, work-(tl.Since()-t0)); err != nil {
		return nil, err
	}
	res.Renewals = renewals.n.Load() - before
	tl.End(spanA)
	uerr = la.Unlock(context.WithoutCancel(ctx))
	tl.Point(wdLane, "A", fmt.Sprintf("work done after %s, Unlock: ok", plural(res.Renewals, "renewal")),
		tl.Add("A", fmt.Sprintf("work done after %s, Unlock: %v", plural(res.Renewals, "renewal"), errText(uerr))))
	if uerr != nil {
		return nil, fmt.Errorf("A (watchdog) lost its lock: %w", uerr)
	}
	if err := <-entered; err != nil {
		return nil, fmt.Errorf("B (watchdog): %w", err)
	}
	res.Watchdog = tl.Events()[mark:]
	res.history = tl.history()
	res.fromHistory()
	return res, nil
}

// The lease drill's lanes.
const (
	fixedLane = "fixed lease"
	wdLane    = "watchdog"
)

// fromHistory sets what the result reads from its spans: when the second
// holder entered each lane, and how long both were inside.
func (r *LeaseResult) fromHistory() {
	leaseEnds(r.Spans, fixedLane, "A", r.LeaseMS)
	if i := firstSpan(r.Spans, fixedLane, "B"); i >= 0 {
		r.SecondHolderEnteredMS = r.Spans[i].StartMS
	}
	r.BothInsideMS = overlapMS(r.Spans, fixedLane, "A", "B")
	if i := firstSpan(r.Spans, wdLane, "B"); i >= 0 {
		r.WatchdogLockLivedMS = r.Spans[i].StartMS - r.watchdogFromMS
	}
}

// Summary returns what the text and the HTML report show.
func (r *LeaseResult) Summary() *Summary {
	return &Summary{
		Title: fmt.Sprintf("lease (000 §3.5) on %s: a %.0f ms lease for %.0f ms of work, then the watchdog", r.Backend, r.LeaseMS, r.WorkMS),
		Parts: []Part{{"Fixed lease", r.Fixed}, {"Watchdog", r.Watchdog}},
		Figures: []Figure{
			{"second holder entered at", fmt.Sprintf("%.1f ms (lease %.0f ms)", r.SecondHolderEnteredMS, r.LeaseMS)},
			{"first told it lost at", fmt.Sprintf("%.1f ms", r.FirstNotifiedLostMS)},
			{"both inside at once", bothInside(r.Spans, fixedLane, "A", "B")},
			{"watchdog: lock lived", fmt.Sprintf("%.1f ms (work %.0f ms), %s every %.0f ms", r.WatchdogLockLivedMS, r.WorkMS, plural(r.Renewals, "renewal"), r.WatchdogIntervalMS)},
		},
		Spans: r.Spans, Points: r.points,
	}
}

// errText is err as a drill's narrative quotes it: "ok" for nil, else the
// error's text with what it repeats left out (errline.Clean: no "dlock: ",
// the cause once).
func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return errline.Clean(err.Error())
}

// renewalCounter is an Observer that counts successful renewals.
type renewalCounter struct{ n atomic.Int64 }

func (c *renewalCounter) ObserveAcquire(observe.AcquireEvent) {}
func (c *renewalCounter) ObserveRelease(observe.ReleaseEvent) {}
func (c *renewalCounter) ObserveLost(observe.LostEvent)       {}
func (c *renewalCounter) ObserveRenewal(e observe.RenewalEvent) {
	if e.OK {
		c.n.Add(1)
	}
}
