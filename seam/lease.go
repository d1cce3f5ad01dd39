package seam

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/clock"
	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/observe"
)

// Lease is the state of one held lock that a Keeper keeps. Users hold it
// as a *dlock.Lease, the same type (the root package declares
// type Lease seam.Lease, and a backend returns (*dlock.Lease)(l)): its
// methods' contracts — what happens on loss, on cancel, on error — are
// documented there, where the user reads them. It is safe for concurrent
// use.
type Lease struct {
	h      *hold
	parent context.Context // the ctx given to Acquire
	owner  string          // "" until Context needs one (a Mutex's is never written to the store)
	onLost func(*Lease)

	mu       sync.Mutex
	released bool
	err      error                   // the loss, once lost
	ctx      context.Context         // made by the first Context call
	cancel   context.CancelCauseFunc // ctx's
	done     chan struct{}           // made by the first Done call
}

// closedChan is the Done of a Lease lost before anyone asked for Done.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (l *Lease) init(h *hold, parent context.Context, owner string, onLost func(*Lease)) {
	l.h, l.parent, l.owner, l.onLost = h, parent, owner, onLost
}

// Name returns the lock's name.
func (l *Lease) Name() string { return l.h.g.name }

// ID returns the id this lease is held under in the store: the Mutex's
// per-acquisition token, the owner of a reentrant, fair or read-write lock,
// or the permit id of a Semaphore (Semaphore.Release takes it). Inspect shows
// its first 8 characters.
func (l *Lease) ID() string { return l.h.g.id }

// Token returns the fencing token of this grant: for one lock name, strictly
// greater than every token granted before it (a reentrant acquisition returns
// its holder's token). Pass it to the storage you write and let the storage
// reject writes with a token lower than one it has seen (package fence).
//
// On Redis, tokens are max(last + 1, a clock in µs: the acquiring client's,
// or the Redis server's on a hand-off), kept in one counter key per Redis
// Cluster hash slot, shared by the names of the slot (at most 16384 keys,
// however many names are locked); after that key is lost (FLUSHALL, a
// restart without persistence, a failover that lost its last write) tokens
// still increase unless the clock that grants next is behind the one of the
// lost grant by more than the time since it: they are as durable as Redis
// replication. A consensus backend (etcdlock, zklock) issues tokens from
// its replicated log, which never goes back.
func (l *Lease) Token() int64 { return l.h.g.token }

// Context returns a context that carries this lease's owner (acquiring a
// reentrant lock with it re-enters) and is cancelled when the lock is lost
// (context.Cause wraps ErrLockLost), when the lease is unlocked, or when the
// context given to Acquire is cancelled (for a downgrade, a read lock taken
// under the write Lease's Context: the one given to the write side's
// Acquire, so that the read goes on after the write's unlock). Run the
// critical section under it.
// (It is made on the first call: a lease nobody asks for a context costs
// none.)
func (l *Lease) Context() context.Context {
	if l == nil {
		return canceledCtx
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		if l.owner == "" {
			l.owner = ids.Token()
		}
		l.ctx, l.cancel = context.WithCancelCause(withOwner(l.parent, l.owner, l))
		switch {
		case l.err != nil:
			l.cancel(l.err)
		case l.released:
			l.cancel(context.Canceled)
		}
	}
	return l.ctx
}

// canceledCtx is the Context of a nil *Lease.
var canceledCtx = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errNilLease)
	return ctx
}()

// Done is closed when the lock is lost, and only then.
func (l *Lease) Done() <-chan struct{} {
	if l == nil {
		return closedChan
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		if l.err != nil {
			return closedChan
		}
		l.done = make(chan struct{})
	}
	return l.done
}

// Err returns nil while the lease is held or after a clean Unlock, and an
// error wrapping ErrLockLost once the lock was lost.
//
// Err reads the client's clock: once the lease's local deadline has passed
// it reports the loss even if the timer that cancels Context has not run yet
// (on a busy machine timers fire late; Err never does).
func (l *Lease) Err() error {
	if l == nil {
		return errNilLease
	}
	l.h.pastDeadline()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// markLost marks l lost; false if it was already lost or released. The
// Keeper's lock is held.
func (l *Lease) markLost(err error) bool {
	l.mu.Lock()
	if l.released || l.err != nil {
		l.mu.Unlock()
		return false
	}
	l.err = err
	if l.cancel != nil {
		l.cancel(err) // before Done closes, so whoever sees Done sees the cause
	}
	if l.done != nil {
		close(l.done)
	}
	l.mu.Unlock()
	if l.onLost != nil {
		l.h.k.bg.Go(func() { l.onLost(l) }) // a Close waits for it, within its bound
	}
	return true
}

// endContext cancels the lease's Context (if one was made) once it is
// unlocked.
func (l *Lease) endContext() {
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel(context.Canceled)
	}
}

// state returns ErrNotHeld after Unlock, the loss once lost, else nil.
func (l *Lease) state(op string) error {
	l.h.pastDeadline() // marks this lease lost if its deadline passed
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.released:
		return Wrap(op, l.h.g.shape, l.h.g.name, ErrNotHeld)
	case l.err != nil:
		return renamed(op, l.err)
	}
	return nil
}

// Verify re-reads ownership in the store: check before commit. It returns
// nil if the lock is still ours, an error wrapping ErrLockLost if it is not
// (the lease is then lost), ErrNotHeld after Unlock, or a store error
// (ownership unknown: do not commit).
func (l *Lease) Verify(ctx context.Context) error {
	if l == nil {
		return errNilLease
	}
	if err := CheckContext(ctx); err != nil {
		return Wrap("verify", l.h.g.shape, l.h.g.name, err)
	}
	if err := l.state("verify"); err != nil {
		return err
	}
	ok, err := l.h.g.ops.Verify(ctx)
	if err != nil {
		return StoreErr(ctx, "verify", l.h.g.shape, l.h.g.name, err)
	}
	if !ok {
		l.h.lose(observe.LostDeletedOrTaken)
		return l.lostErr("verify")
	}
	return l.state("verify")
}

// Extend sets the remaining lease to d (at least 1 ms) if the lock is still
// ours. On a watchdog lease the watchdog goes on renewing to its timeout.
// It returns an error wrapping ErrLockLost if the lock is no longer ours.
func (l *Lease) Extend(ctx context.Context, d time.Duration) error {
	if l == nil {
		return errNilLease
	}
	if err := CheckContext(ctx); err != nil {
		return Wrap("extend", l.h.g.shape, l.h.g.name, err)
	}
	if d < time.Millisecond {
		return Wrap("extend", l.h.g.shape, l.h.g.name, fmt.Errorf("%w: %v", ErrInvalidDuration, d))
	}
	if err := l.state("extend"); err != nil {
		return err
	}
	sent := clock.Now(l.h.k.clock)
	ok, err := l.h.g.ops.Extend(ctx, d)
	if err != nil {
		return StoreErr(ctx, "extend", l.h.g.shape, l.h.g.name, err)
	}
	if !ok {
		l.h.lose(observe.LostDeletedOrTaken)
		return l.lostErr("extend")
	}
	l.h.extended(sent, d, false)
	return l.state("extend")
}

// LostReleaseTimeout bounds how long Unlock tries to release a lease that
// was already lost.
const LostReleaseTimeout = time.Second

// releaseLost tries the release of a lost grant for at most
// LostReleaseTimeout, beside the caller: a store client that does not bound
// its calls by ctx (go-redis without ContextTimeoutEnabled) ends the call by
// its own timeouts, after Unlock has returned (a Close waits for it,
// within its bound). Once the Keeper is closed it sends nothing.
func (k *keeper) releaseLost(ctx context.Context, ops GrantOps) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), LostReleaseTimeout)
	done := make(chan struct{})
	k.mu.Lock()
	started := k.goLocked(func() {
		defer close(done)
		defer cancel()
		_, _ = ops.Release(rctx)
	})
	k.mu.Unlock()
	if !started {
		cancel()
		return
	}
	select {
	case <-done:
	case <-rctx.Done():
	case <-ctx.Done():
	}
}

// lostErr is the loss of l as the error of the call op that found it.
func (l *Lease) lostErr(op string) error {
	if err := l.Err(); err != nil {
		return renamed(op, err)
	}
	return Wrap(op, l.h.g.shape, l.h.g.name, ErrLockLost)
}

// Unlock releases this hold. It returns nil if the lock was still ours, an
// error wrapping ErrLockLost if it had been lost (whatever ran under it ran
// without exclusivity), ErrNotHeld if this lease was already unlocked, or a
// store error (the lock then expires by itself). A loss and an Unlock are
// ordered: once a loss was reported (the Observer's LostEvent, Done, the
// Context's cause), no Unlock of a Lease it ended returns nil. A reentrant
// lock is free once every Lease of its owner is unlocked. Unlock stops
// renewing before it sends the release, so no renewal outlives it. The
// release of a lease already lost is tried for at most LostReleaseTimeout
// (the store may be unreachable: that is often why it was lost), and the
// loss is returned whatever the try says; a grant still in the store then
// ends by its expiry. A lease whose hold was lost at MaxHold or by the
// client's Close was released in the store then: its Unlock sends nothing.
func (l *Lease) Unlock(ctx context.Context) error {
	if l == nil {
		return errNilLease
	}
	if err := CheckContext(ctx); err != nil { // bad input changes nothing: the lease stays held
		return Wrap("unlock", l.h.g.shape, l.h.g.name, err)
	}
	h := l.h
	d, ok := h.k.detach(h, l) // a lease past its deadline is unlocked as lost
	if !ok {
		return Wrap("unlock", h.g.shape, h.g.name, ErrNotHeld)
	}
	lost, last, renewals := d.lost, d.last, d.renewals
	res, err := ReleasedStillHeld, error(nil)
	switch {
	case !h.g.storeCounts && d.others > 0: // a re-entry the Keeper counts: nothing to tell the store
	case lost != nil && d.freed: // the Keeper released the whole hold (MaxHold, Close)
	case lost != nil:
		h.k.releaseLost(ctx, h.g.ops) // whatever it says, the loss stands
	default:
		res, err = h.g.ops.Release(ctx)
	}
	l.endContext()

	foundLost := lost != nil || (err == nil && res == ReleasedNotOurs)
	h.k.observer.ObserveRelease(observe.ReleaseEvent{Shape: h.g.shape, Name: h.g.name, Token: h.g.token, Held: clock.Since(h.k.clock, h.since), Granted: h.since, Lease: h.fixedLease(),
		Renewals: renewals, FoundLost: foundLost, LostBefore: lost != nil, Last: last, Err: err})
	switch {
	case lost != nil:
		return renamed("unlock", lost)
	case err != nil:
		return StoreErr(ctx, "unlock", h.g.shape, h.g.name, err)
	case res == ReleasedNotOurs:
		if last { // the hold ended with this Lease: nobody else reports the loss
			h.report(observe.LostDeletedOrTaken, 0, renewals)
		} else { // marks other Leases of this owner (unless a loss was already reported)
			h.lose(observe.LostDeletedOrTaken)
		}
		return Wrap("unlock", h.g.shape, h.g.name, fmt.Errorf("%w (released by someone else or expired)", ErrLockLost))
	}
	return nil
}
