package dlock

import (
	"context"
	"time"

	"github.com/dlockgo/dlock/seam"
)

// Lease is the handle of one held lock, whatever its shape or backend (the
// Redis locks of this package, etcdlock, zklock, dlockfake). It is safe for
// concurrent use; a nil *Lease (the one a failed Acquire returns) answers
// every method with an error and never panics.
//
// Losing the lock is one fact with three faces: Context is cancelled with
// cause ErrLockLost, Done is closed, and Unlock returns an error wrapping
// ErrLockLost. A lease is lost when its fixed lease runs out on the
// client's clock, when it cannot be renewed before it would run out (the
// store down, paused or cut off), when the store no longer holds it for us
// (deleted, flushed, expired, taken over), at MaxHold, or when its client
// is closed.
//
// (A backend makes it from the lease its seam.Keeper keeps: the two are one
// type, and (*dlock.Lease)(l) converts one to the other.)
type Lease seam.Lease

func (l *Lease) s() *seam.Lease { return (*seam.Lease)(l) }

// Name returns the lock's name ("" for a nil Lease).
func (l *Lease) Name() string {
	if l == nil {
		return ""
	}
	return l.s().Name()
}

// ID returns the id this lease is held under in the store: a Mutex's
// per-acquisition token, the owner of a reentrant, fair or read-write lock,
// or the permit id of a Semaphore (Semaphore.Release takes it). Inspect
// shows its first 8 characters.
func (l *Lease) ID() string {
	if l == nil {
		return ""
	}
	return l.s().ID()
}

// Token returns the fencing token of this grant (0 for a nil Lease): for
// one lock name, strictly greater than every token granted before it (a
// reentrant acquisition returns its holder's token). Pass it to the storage
// you write and let the storage reject writes with a token lower than one
// it has seen (package fence).
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
func (l *Lease) Token() int64 {
	if l == nil {
		return 0
	}
	return l.s().Token()
}

// Context returns a context that carries this lease's owner (acquiring a
// reentrant lock with it re-enters) and is cancelled when the lock is lost
// (context.Cause wraps ErrLockLost), when the lease is unlocked, or when the
// context given to Acquire is cancelled (for a downgrade, a read lock taken
// under the write Lease's Context: the one given to the write side's
// Acquire, so that the read goes on after the write's unlock). Run the
// critical section under it.
// (It is made on the first call: a lease nobody asks for a context costs
// none.)
func (l *Lease) Context() context.Context { return l.s().Context() }

// Done is closed when the lock is lost, and only then.
func (l *Lease) Done() <-chan struct{} { return l.s().Done() }

// Err returns nil while the lease is held or after a clean Unlock, and an
// error wrapping ErrLockLost once the lock was lost, which names the call
// "hold" (dlock: hold mutex "stock:1": lock lost (expired)); Unlock, Extend
// and Verify report the same loss as their own call's error (dlock: unlock
// mutex "stock:1": lock lost (expired)).
//
// Err reads the client's clock: once the lease's local deadline has passed
// it reports the loss even if the timer that cancels Context has not run yet
// (on a busy machine timers fire late; Err never does).
func (l *Lease) Err() error { return l.s().Err() }

// Verify re-reads ownership in the store: check before commit. It returns
// nil if the lock is still ours, an error wrapping ErrLockLost if it is not
// (the lease is then lost), ErrNotHeld after Unlock, or a store error
// (ownership unknown: do not commit).
func (l *Lease) Verify(ctx context.Context) error { return l.s().Verify(ctx) }

// Extend sets the remaining lease to d (at least 1 ms) if the lock is still
// ours. On a watchdog lease the watchdog goes on renewing to its timeout.
// It returns an error wrapping ErrLockLost if the lock is no longer ours.
// On a Redis Cluster whose slot is moving (or electing) Extend and Unlock
// wait it out, until ctx ends (at most 5 s for a ctx without a deadline).
func (l *Lease) Extend(ctx context.Context, d time.Duration) error { return l.s().Extend(ctx, d) }

// Unlock releases this hold. It returns nil if the lock was still ours, an
// error wrapping ErrLockLost if it had been lost (whatever ran under it ran
// without exclusivity), ErrNotHeld if this lease was already unlocked, or a
// store error (the lock then expires by itself). A loss and an Unlock are
// ordered: once a loss was reported (the Observer's LostEvent, Done, the
// Context's cause), no Unlock of a Lease it ended returns nil. A reentrant
// lock is free once every Lease of its owner is unlocked. Unlock stops
// renewing before it sends the release, so no renewal outlives it. The
// release of a lease already lost is tried for at most a second (the store
// may be unreachable: that is often why it was lost), and the loss is
// returned whatever the try says; a grant still in the store then ends by
// its expiry. A lease whose hold was lost at MaxHold or by the client's
// Close was released in the store then: its Unlock sends nothing. Under a
// ctx with a deadline, Unlock and Extend return by it on a standalone or
// failover go-redis client whatever its options (see New); a release cut
// off by the deadline returns ctx's error, and the lock then ends by its
// lease unless the release had run.
func (l *Lease) Unlock(ctx context.Context) error { return l.s().Unlock(ctx) }
