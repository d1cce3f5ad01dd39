package witness

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Held is a granted lock as the History's helpers use it (a *dlock.Lease
// is one).
type Held interface {
	Lease
	Token() int64
	Unlock(ctx context.Context) error
}

// Acquire takes one lock through one client, waiting up to wait.
type Acquire func(ctx context.Context, wait time.Duration) (Held, error)

// unlockTimeout bounds the Unlock of the helpers: a lost lock's release
// may wait for a store that is cut off.
const unlockTimeout = 5 * time.Second

// HoldAndUnlock holds g (held as l) as Hold does, then unlocks it (bounded
// by 5 s, its error ignored: a lost lock's is expected); it returns
// whether the lock was lost.
func (h *History) HoldAndUnlock(g *Grant, l Held, d time.Duration, stop <-chan struct{}) bool {
	lost := h.Hold(g, l, d, stop)
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	_ = l.Unlock(ctx)
	return lost
}

// Contend takes the lock with acquire (waiting up to wait) over and over
// until stop closes or ctx ends, recording each grant as who's on side and
// holding it for d (or until it is lost); it returns how many acquisitions
// failed.
func (h *History) Contend(ctx context.Context, who, side string, acquire Acquire, wait, d time.Duration, stop <-chan struct{}) int {
	failed := 0
	for {
		select {
		case <-stop:
			return failed
		case <-ctx.Done():
			return failed
		default:
		}
		actx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
		l, err := acquire(actx, wait)
		cancel()
		if err != nil {
			failed++
			select {
			case <-stop:
				return failed
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		h.HoldAndUnlock(h.Granted(who, side, l.Token()), l, d, stop)
	}
}

// CutOff is one split of a cluster: a holder whose client reaches only
// the minority side, a waiter whose client reaches only the majority.
type CutOff struct {
	Minority, Majority Acquire
	// Queued returns once the majority's waiter is queued behind the holder.
	Queued func(ctx context.Context) error
	// Cut splits the cluster; Heal brings every link up again.
	Cut, Heal func() error
	// Elected waits until the majority has a leader and names it.
	Elected func(ctx context.Context) (string, error)
}

// CutOffFigures are what Run measured, from the cut.
type CutOffFigures struct {
	Figures
	Elected      time.Duration // until the majority had a leader
	Told         time.Duration // until the holder was told it lost the lock
	Granted      time.Duration // until the majority granted the lock
	Margin       time.Duration // Granted - Told: > 0 unless there was a double grant
	Leader       string        // the majority's leader
	Tokens       [3]int64      // the holder's, the waiter's, the holder's client's after Heal
	Violations   []error       // overlaps, tokens out of order, a grant before the loss signal
	LostErr      error         // the cut-off holder's Err once it was told
	UnlockedLost error         // the cut-off holder's Unlock
}

func (f CutOffFigures) String() string {
	return fmt.Sprintf("leader %s elected %v after the cut; the holder was told %v after the cut; the majority granted the lock %v "+
		"after the cut, %v after the loss signal; tokens %v; %v", f.Leader, f.Elected.Round(time.Millisecond),
		f.Told.Round(time.Millisecond), f.Granted.Round(time.Millisecond), f.Margin.Round(time.Millisecond), f.Tokens, f.Figures)
}

// Run plays the split: the minority's client takes the lock, the
// majority's queues for it (waiting 30 s), the cluster is cut; the holder
// must be told it lost the lock and the majority must grant it. Then the
// links heal, the majority's holder unlocks and the minority's client takes
// the lock again. It returns an error if a step fails (the holder is never
// told, the majority never grants...); what a lock must keep whatever the
// network does (no overlap, tokens increasing, the loss told before the
// next grant) is in the figures' Violations, for the caller to judge.
func (s CutOff) Run(ctx context.Context) (CutOffFigures, error) {
	var f CutOffFigures
	h := &History{}
	held, err := s.Minority(ctx, 0)
	if err != nil {
		return f, fmt.Errorf("the minority's holder: %w", err)
	}
	// The holder and the waiter run until they are done or Run returns.
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ga := h.Granted("a", "minority", held.Token())
	lost := make(chan bool, 1)
	wg.Add(2)
	go func() {
		defer wg.Done()
		lost <- h.Hold(ga, held, 0, rctx.Done())
	}()
	type result struct {
		l   Held
		g   *Grant
		err error
	}
	got := make(chan result, 1)
	go func() {
		defer wg.Done()
		l, err := s.Majority(rctx, 30*time.Second)
		if err != nil {
			got <- result{err: err}
			return
		}
		got <- result{l: l, g: h.Granted("b", "majority", l.Token())}
	}()
	if err := s.Queued(ctx); err != nil {
		return f, fmt.Errorf("the majority's waiter: %w", err)
	}

	if err := s.Cut(); err != nil {
		return f, err
	}
	cut := time.Now()
	if f.Leader, err = s.Elected(ctx); err != nil {
		return f, err
	}
	f.Elected = time.Since(cut)
	r := <-got
	if r.err != nil {
		return f, fmt.Errorf("the majority never granted the lock: %w", r.err)
	}
	if !<-lost {
		return f, errors.New("the holder cut off was never told it lost the lock")
	}
	f.LostErr = held.Err()
	f.Told, f.Granted = ga.Lost.Sub(cut), r.g.At.Sub(cut)
	f.Margin = f.Granted - f.Told
	uctx, ucancel := context.WithTimeout(ctx, unlockTimeout)
	f.UnlockedLost = held.Unlock(uctx)
	ucancel()

	if err := s.Heal(); err != nil {
		return f, err
	}
	h.Left(r.g, false)
	if err := r.l.Unlock(ctx); err != nil {
		return f, fmt.Errorf("the majority's holder: %w", err)
	}
	again, err := s.Minority(ctx, 30*time.Second)
	if err != nil {
		return f, fmt.Errorf("the cut-off client after Heal: %w", err)
	}
	h.Left(h.Granted("a", "healed", again.Token()), false)
	if err := again.Unlock(ctx); err != nil {
		return f, fmt.Errorf("the cut-off client's lock after Heal: %w", err)
	}
	f.Tokens = [3]int64{ga.Token, r.g.Token, again.Token()}
	f.Figures, f.Violations = h.Check()
	if f.Losses == 0 {
		f.Violations = append(f.Violations, errors.New("the holder's loss is not followed by a grant"))
	}
	return f, nil
}
