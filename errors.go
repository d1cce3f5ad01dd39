package dlock

import (
	"context"
	"errors"

	"github.com/dlockgo/dlock/seam"
)

// Sentinel errors. Every error of this package and of every dlock backend
// that has one of these meanings wraps it, so test with errors.Is. Errors
// name the call, the lock's shape and its name once (see Errors in the
// package doc): `dlock: acquire mutex "stock:1": not acquired`.
var (
	// ErrNotAcquired: the lock was held by someone else for the whole wait.
	// This is the degraded path ("busy, try later"), not a failure of the
	// store.
	ErrNotAcquired = seam.ErrNotAcquired

	// ErrLockLost: the lock stopped being ours before we released it: its
	// lease ran out, it could not be renewed in time, or the key was
	// deleted or taken over. Whatever ran under the lock ran without
	// exclusivity: roll it back or reconcile it. Never ignore it.
	ErrLockLost = seam.ErrLockLost

	// ErrNotHeld: unlocking (or extending) a lease that was already
	// released, or a permit or owner that holds nothing.
	ErrNotHeld = seam.ErrNotHeld

	// ErrNotReplicated: ReplicaAck was requested and too few replicas
	// acknowledged the acquisition in time (or too few were connected).
	// The acquisition was undone.
	ErrNotReplicated = seam.ErrNotReplicated

	// ErrInvalidName: an empty lock name, or one longer than 1024 bytes.
	ErrInvalidName = seam.ErrInvalidName

	// ErrInvalidDuration: a zero or negative duration where a positive one
	// is needed (lease, extension, watchdog timeout), or a negative wait.
	ErrInvalidDuration = seam.ErrInvalidDuration

	// ErrInvalidArgument: any other option or argument out of range
	// (nil client, replica count < 1, nil function, ...).
	ErrInvalidArgument = seam.ErrInvalidArgument

	// ErrWrongType: the lock's key exists but holds a value of another type
	// or shape (someone else uses the key). Nothing was changed.
	ErrWrongType = seam.ErrWrongType

	// ErrUpgrade: the owner holds the read side of an RWLock and asked for
	// its write side. Waiting would deadlock against every other reader (and
	// against itself), so it is refused at once: unlock the read side first.
	ErrUpgrade = seam.ErrUpgrade

	// ErrClosed: the Client was closed.
	ErrClosed = seam.ErrClosed
)

// errNotOurs is internal: a compare-then-act script found the lock gone or
// held by someone else.
var errNotOurs = errors.New("dlock: not ours")

// wrap names the operation, the shape and the lock on err, once.
func wrap(op, shape, name string, err error) error { return seam.Wrap(op, shape, name, err) }

// checkCall checks a call's ctx and lock name.
func checkCall(ctx context.Context, name string) error {
	if err := seam.CheckContext(ctx); err != nil {
		return err
	}
	return seam.CheckName(name)
}

func isNotAcquired(err error) bool { return errors.Is(err, ErrNotAcquired) }
