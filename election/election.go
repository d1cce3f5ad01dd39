// Package election runs a function on exactly one of the replicas that
// campaign for the same name at a time, on any dlock backend (Redis,
// etcdlock, zklock): what etcd's concurrency.Election and Curator's
// LeaderSelector give, with the fencing token of each term and the
// lost-lock signal of dlock.
//
// Leadership is a lock: a replica leads while it holds it, kept by its
// backend's renewals (the watchdog, a session). A leader whose renewals
// stop (its store cut off) sees its term's Context cancelled with cause
// dlock.ErrLockLost before another replica can be granted the lock on the
// store's clock; a leader whose lock is taken from outside learns it at
// its next renewal; a leader whose process is paused cannot know it was
// paused and may act on a term that has ended. Every term carries the
// token the lock was granted with: strictly increasing from one term to
// the next, so a storage that fences on it rejects a deposed leader's late
// writes — fence what a leader must never do twice.
package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// Election is one name's election, seen from one replica: a lock of the
// backend (typically its Mutex) that decides who leads, and the backend
// client's Inspector to observe who does.
type Election struct {
	lock dlock.Locker
	insp Inspector
	opts []dlock.Option
}

// New returns the election decided by lock, observed through insp (the
// backend client lock came from: every backend client is an Inspector).
// opts are the options of every campaign's Acquire (dlock.MaxHold caps a
// term, dlock.QueueTimeout, ...; a campaign waits for as long as its ctx
// allows; with dlock.Wait, one that waited that long campaigns again).
func New(lock dlock.Locker, insp Inspector, opts ...dlock.Option) *Election {
	return &Election{lock: lock, insp: insp, opts: opts}
}

// Inspector reads the state of a lock by name without changing it; every
// backend client implements it (dlock.Client, etcdlock.Client,
// zklock.Client, dlockfake.Client), with the same meaning of every field of
// dlock.Info.
type Inspector interface {
	Inspect(ctx context.Context, name string) (dlock.Info, error)
}

// Term is one replica's time as leader.
type Term struct {
	// Context is cancelled when the term ends: leadership lost (cause
	// dlock.ErrLockLost), or the ctx given to Lead done.
	Context context.Context
	// Token is the lock's fencing token for this term.
	Token int64
	// Since is when the term began (this replica's clock).
	Since time.Time
	// Lease is the lock held for the term.
	Lease *dlock.Lease
}

// Lead campaigns until ctx is done. Each time this replica is elected, it
// runs fn with the term (run the leader's work under term.Context, and
// return when it is cancelled); when fn returns, the term ends and the
// lock is released. If fn returns nil or the term was lost (whatever fn
// returned then), Lead campaigns again; if fn returns another error (one
// that wraps context.Canceled too), Lead ends with it. If fn panics, the
// term ends and the lock is released, and the panic goes on with its
// value (as under dlock.Do): a program that recovers it does not keep
// leadership. Lead returns ctx's error when ctx is done (the lock
// released if it was held), an error of the backend that makes
// campaigning impossible (bad input, a closed client, a name whose key
// holds another type), or fn's error. A campaign refused at once (a Wait
// among the options that ran out) is tried again no sooner than 200 ms
// after the previous one. A release that fails (the store unreachable)
// leaves the lock to expire by itself and Lead campaigns again; the
// backend's Observer sees it (observe.ReleaseEvent.Err).
func (e *Election) Lead(ctx context.Context, fn func(term Term) error) error {
	err := seam.CheckContext(ctx)
	if err == nil && (fn == nil || e.lock == nil) {
		err = fmt.Errorf("%w: nil function or lock", dlock.ErrInvalidArgument)
	}
	if err != nil {
		return e.wrap("lead", err)
	}
	for {
		started := time.Now()
		l, err := e.lock.Acquire(ctx, e.opts...)
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, dlock.ErrInvalidName), errors.Is(err, dlock.ErrInvalidArgument),
			errors.Is(err, dlock.ErrInvalidDuration), errors.Is(err, dlock.ErrClosed), errors.Is(err, dlock.ErrWrongType):
			return err
		default: // a Wait ran out, or the store failed: campaign again after a moment
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(retryAfter - time.Since(started)):
			}
			continue
		}
		ferr, lost := lead(ctx, l, fn)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case ferr != nil && !lost && !errors.Is(ferr, dlock.ErrLockLost):
			return ferr
		}
	}
}

// lead runs one term of fn under l and releases l when fn returns or
// panics (the panic goes on after the release). lost reports whether the
// term was lost before fn returned.
func lead(ctx context.Context, l *dlock.Lease, fn func(term Term) error) (ferr error, lost bool) {
	defer func() {
		lost = l.Err() != nil
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = l.Unlock(uctx) // a failed release: the lock expires by itself (ReleaseEvent.Err)
	}()
	return fn(Term{Context: l.Context(), Token: l.Token(), Since: time.Now(), Lease: l}), false
}

// retryAfter is the least time between two campaigns of Lead that did not
// win (a Wait that ran out, a store that failed).
const retryAfter = 200 * time.Millisecond

// Leader describes who leads an election right now.
type Leader struct {
	// Leading: someone holds the lock.
	Leading bool
	// Holder is the leader as its backend describes it: its id, host, pid,
	// label, since when, and Fence, the token of its term.
	Holder dlock.Holder
}

// Leader reads who leads now.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	err := seam.CheckContext(ctx)
	if err == nil && (e.insp == nil || e.lock == nil) {
		err = fmt.Errorf("%w: no Inspector or lock", dlock.ErrInvalidArgument)
	}
	if err != nil {
		return Leader{}, e.wrap("leader", err)
	}
	info, err := e.insp.Inspect(ctx, e.lock.Name())
	if err != nil {
		return Leader{}, err
	}
	if !info.Held || len(info.Holders) == 0 {
		return Leader{}, nil
	}
	return Leader{Leading: true, Holder: info.Holders[0]}, nil
}

// Observe sends who leads, first now and then at every change (a new
// leader, or none), reading it every interval (at least 10 ms) until ctx
// is done, when it closes the channel. A reader that falls behind misses
// intermediate leaders, never the latest. Errors reading the store are
// skipped (the next reading retries). A nil ctx, or an Election without an
// Inspector or a lock, gives a closed channel.
func (e *Election) Observe(ctx context.Context, every time.Duration) <-chan Leader {
	every = max(every, 10*time.Millisecond)
	out := make(chan Leader, 1)
	if seam.CheckContext(ctx) != nil || e.insp == nil || e.lock == nil {
		close(out)
		return out
	}
	go func() {
		defer close(out)
		var last Leader
		first := true
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if now, err := e.Leader(ctx); err == nil && (first || changed(last, now)) {
				first, last = false, now
				select { // keep only the latest
				case <-out:
				default:
				}
				out <- now
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// wrap names the call op and e's lock on err: dlock: lead "leader": ...
// (the Locker does not tell its shape; without a lock, the call alone).
func (e *Election) wrap(op string, err error) error {
	if e.lock == nil {
		return seam.WrapCall(op, err)
	}
	return seam.Wrap(op, "", e.lock.Name(), err)
}

func changed(a, b Leader) bool {
	return a.Leading != b.Leading || a.Holder.ID != b.Holder.ID || a.Holder.Fence != b.Holder.Fence
}
