package dlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors. Every error returned by this package that has one of these
// meanings wraps it, so test with errors.Is. Errors also carry the lock name.
var (
	// ErrNotAcquired: the lock was held by someone else for the whole wait.
	// This is the degraded path ("busy, try later"), not a failure of Redis.
	ErrNotAcquired = errors.New("dlock: not acquired")

	// ErrLockLost: the lock stopped being ours before we released it: its
	// lease ran out, the watchdog could not renew it in time, or the key was
	// deleted or taken over. Whatever ran under the lock ran without
	// exclusivity: roll it back or reconcile it. Never ignore it.
	ErrLockLost = errors.New("dlock: lock lost")

	// ErrNotHeld: unlocking (or extending) a lease that was already
	// released, or a permit or owner that holds nothing.
	ErrNotHeld = errors.New("dlock: not held")

	// ErrNotReplicated: ReplicaAck was requested and too few replicas
	// acknowledged the acquisition in time (or too few were connected).
	// The acquisition was undone.
	ErrNotReplicated = errors.New("dlock: not replicated")

	// ErrInvalidName: an empty lock name, or one longer than MaxNameLen.
	ErrInvalidName = errors.New("dlock: invalid lock name")

	// ErrInvalidDuration: a zero or negative duration where a positive one
	// is needed (lease, extension, watchdog timeout), or a negative wait.
	ErrInvalidDuration = errors.New("dlock: invalid duration")

	// ErrInvalidArgument: any other option or argument out of range
	// (nil client, replica count < 1, nil function, ...).
	ErrInvalidArgument = errors.New("dlock: invalid argument")

	// ErrWrongType: the lock's key exists in Redis but holds a value of
	// another type or shape (someone else uses the key). Nothing was changed.
	ErrWrongType = errors.New("dlock: key holds the wrong type")

	// ErrUpgrade: the owner holds the read side of an RWLock and asked for
	// its write side. Waiting would deadlock against every other reader (and
	// against itself), so it is refused at once: unlock the read side first.
	ErrUpgrade = errors.New("dlock: read lock cannot be upgraded to a write lock")

	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("dlock: client closed")
)

// errNotOurs is internal: a compare-then-act script found the lock gone or
// held by someone else.
var errNotOurs = errors.New("dlock: not ours")

// opError is the error of one operation on one lock, written once:
// `dlock: <op> "<name>": <cause>`, where the cause's own "dlock: " prefix is
// dropped. It wraps the cause (errors.Is sees the sentinel).
type opError struct {
	op, name string
	err      error
}

func (e *opError) Error() string {
	name := e.name
	if len(name) > 64 { // an oversized name is shown by its start
		name = strings.ToValidUTF8(name[:64], "") + "…"
	}
	return "dlock: " + e.op + " " + strconv.Quote(name) + ": " + strings.TrimPrefix(e.err.Error(), "dlock: ")
}

func (e *opError) Unwrap() error { return e.err }

// wrap names the operation and the lock on err, once: an error that already
// names its operation and lock is returned as it is.
func wrap(op, name string, err error) error {
	if _, ok := err.(*opError); ok {
		return err
	}
	return &opError{op: op, name: name, err: err}
}

// storeErr names op and the lock on an error from the store; when ctx ended
// the call, it is ctx's error that is wrapped.
func storeErr(ctx context.Context, op, name string, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || isTimeout(err)) {
		return wrap(op, name, ctx.Err())
	}
	return wrap(op, name, err)
}

// errNilLease is what the methods of a nil *Lease return.
var errNilLease = fmt.Errorf("%w (nil lease)", ErrNotHeld)

func isNotAcquired(err error) bool { return errors.Is(err, ErrNotAcquired) }

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}
