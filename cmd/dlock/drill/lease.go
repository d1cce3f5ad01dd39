package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
)

// LeaseResult is what the lease drill (000 §3.5) measured. Times are from
// the first holder's acquire.
type LeaseResult struct {
	Backend               string  `json:"backend"`
	LeaseMS               float64 `json:"lease_ms"`
	WorkMS                float64 `json:"work_ms"`
	SecondHolderEnteredMS float64 `json:"second_holder_entered_ms"`
	FirstNotifiedLostMS   float64 `json:"first_notified_lost_ms"`
	FirstUnlockError      string  `json:"first_unlock_error"`
	WatchdogLockLivedMS   float64 `json:"watchdog_lock_lived_ms"`
	WatchdogIntervalMS    float64 `json:"watchdog_interval_ms"`
	Renewals              int64   `json:"renewals"`
	Fixed                 []Event `json:"fixed_lease_timeline"`
	Watchdog              []Event `json:"watchdog_timeline"`
	Spans                 []Span  `json:"spans"`
	points                []Point // for the report
}

// Lease runs 000 §3.5's experiment: a fixed lease shorter than the work
// (when does the second holder get in, and when does the first learn it lost
// the lock?), then the same work under the watchdog with its timeout set to
// the lease (how long does the lock live, and how many renewals keep it?).
func Lease(ctx context.Context, b LockService, lease, work time.Duration) (*LeaseResult, error) {
	if lease <= 0 || work <= 0 {
		return nil, errors.New("lease and work must be positive")
	}
	res := &LeaseResult{Backend: kindOf(b), LeaseMS: msf(lease), WorkMS: msf(work), WatchdogIntervalMS: msf(lease / 3)}
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
	const fixedLane, wdLane = "fixed lease", "watchdog"
	point := func(lane, who, label string, at time.Duration) {
		res.points = append(res.points, Point{Lane: lane, Who: who, AtMS: msf(at), Label: label})
	}
	la, err := ca.Lock(name).Acquire(ctx, dlock.LeaseTime(lease), dlock.Wait(0))
	if err != nil {
		return nil, fmt.Errorf("A: %w", err)
	}
	spanA := tl.Begin(fixedLane, "A")
	tl.Add("A", fmt.Sprintf("acquired with a fixed lease of %v; starts %v of work", lease, work))
	entered := make(chan error, 1)
	go func() {
		lb, err := cb.Lock(name).Acquire(ctx, dlock.Wait(work+lease))
		if err == nil {
			res.SecondHolderEnteredMS = msf(tl.Add("B", "acquired: now two workers are inside"))
			span := tl.Begin(fixedLane, "B")
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
		point(fixedLane, "A", "told: lock lost", at)
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
	point(fixedLane, "A", "work done, Unlock: lost", tl.Add("A", fmt.Sprintf("work done, Unlock: %v", errText(uerr))))
	if err := <-entered; err != nil {
		return nil, fmt.Errorf("B: %w", err)
	}
	res.Fixed = tl.Events()

	// Watchdog.
	name += ":wd"
	mark := len(tl.Events())
	t0 := tl.Since()
	la, err = ca.Lock(name).Acquire(ctx, dlock.Wait(0))
	if err != nil {
		return nil, fmt.Errorf("A (watchdog): %w", err)
	}
	spanA = tl.Begin(wdLane, "A")
	before := renewals.n.Load()
	tl.Add("A", fmt.Sprintf("acquired, watchdog timeout %v (renewal every %v); starts %v of work", lease, (lease/3).Round(time.Millisecond), work))
	go func() {
		lb, err := cb.Lock(name).Acquire(ctx, dlock.Wait(2*work+lease))
		if err == nil {
			res.WatchdogLockLivedMS = msf(tl.Add("B", "acquired") - t0)
			span := tl.Begin(wdLane, "B")
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
	point(wdLane, "A", fmt.Sprintf("work done after %d renewals, Unlock: ok", res.Renewals),
		tl.Add("A", fmt.Sprintf("work done after %d renewals, Unlock: %v", res.Renewals, errText(uerr))))
	if uerr != nil {
		return nil, fmt.Errorf("A (watchdog) lost its lock: %w", uerr)
	}
	if err := <-entered; err != nil {
		return nil, fmt.Errorf("B (watchdog): %w", err)
	}
	res.Watchdog = tl.Events()[mark:]
	res.Spans = tl.Spans()
	leaseEnds(res.Spans, fixedLane, "A", res.LeaseMS)
	return res, nil
}

// Report returns the drill's HTML report.
func (r *LeaseResult) Report() *Report {
	return &Report{
		Title:  "lease (000 §3.5): a lease shorter than the work, then the watchdog",
		Spans:  r.Spans,
		Points: r.points,
		Events: append(append([]Event(nil), r.Fixed...), r.Watchdog...),
		Figures: [][2]string{
			{"lease / work", fmt.Sprintf("%.0f ms / %.0f ms", r.LeaseMS, r.WorkMS)},
			{"second holder entered at", fmt.Sprintf("%.1f ms", r.SecondHolderEnteredMS)},
			{"first told it lost at", fmt.Sprintf("%.1f ms", r.FirstNotifiedLostMS)},
			{"watchdog: lock lived", fmt.Sprintf("%.1f ms, %d renewals", r.WatchdogLockLivedMS, r.Renewals)},
		},
	}
}

// Print writes the result for people.
func (r *LeaseResult) Print(w io.Writer) {
	fmt.Fprintf(w, "lease (000 §3.5): lease %.0f ms, work %.0f ms\n\nFixed lease:\n", r.LeaseMS, r.WorkMS)
	printEvents(w, r.Fixed)
	fmt.Fprintf(w, "\nWatchdog:\n")
	printEvents(w, r.Watchdog)
	fmt.Fprintf(w, "\nsecond holder entered at   %8.1f ms (lease %.0f ms)\n", r.SecondHolderEnteredMS, r.LeaseMS)
	fmt.Fprintf(w, "first told it lost at      %8.1f ms\n", r.FirstNotifiedLostMS)
	fmt.Fprintf(w, "watchdog lock lived        %8.1f ms (work %.0f ms), %d renewals every %.0f ms\n",
		r.WatchdogLockLivedMS, r.WorkMS, r.Renewals, r.WatchdogIntervalMS)
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// renewalCounter is an Observer that counts successful renewals.
type renewalCounter struct{ n atomic.Int64 }

func (c *renewalCounter) ObserveAcquire(dlock.AcquireEvent) {}
func (c *renewalCounter) ObserveRelease(dlock.ReleaseEvent) {}
func (c *renewalCounter) ObserveLost(dlock.LostEvent)       {}
func (c *renewalCounter) ObserveRenewal(e dlock.RenewalEvent) {
	if e.OK {
		c.n.Add(1)
	}
}
