package seam

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors, re-exported by package dlock (see there). Every error a
// backend returns that has one of these meanings wraps it.
var (
	ErrNotAcquired     = errors.New("dlock: not acquired")
	ErrLockLost        = errors.New("dlock: lock lost")
	ErrNotHeld         = errors.New("dlock: not held")
	ErrNotReplicated   = errors.New("dlock: not replicated")
	ErrInvalidName     = errors.New("dlock: invalid lock name")
	ErrInvalidDuration = errors.New("dlock: invalid duration")
	ErrInvalidArgument = errors.New("dlock: invalid argument")
	ErrWrongType       = errors.New("dlock: key holds the wrong type")
	ErrUpgrade         = errors.New("dlock: read lock cannot be upgraded to a write lock")
	ErrClosed          = errors.New("dlock: client closed")
)

// opError is the error of one call, written once: `dlock: <op> <shape>
// "<name>": <cause>` for a call on one lock (Wrap), `dlock: <op>: <cause>`
// for a call on none (WrapCall), where the cause's own "dlock: " prefix is
// dropped. It wraps the cause (errors.Is sees the sentinel).
type opError struct {
	op, shape, name string
	onLock          bool // a call on one lock: its shape and name are shown
	err             error
}

func (e *opError) Error() string {
	var b strings.Builder
	b.WriteString("dlock: ")
	b.WriteString(e.op)
	if e.shape != "" {
		b.WriteByte(' ')
		b.WriteString(e.shape)
	}
	if e.onLock {
		name := e.name
		if len(name) > 64 { // an oversized name is shown by its start
			name = strings.ToValidUTF8(name[:64], "") + "…"
		}
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(name))
	}
	b.WriteString(": ")
	b.WriteString(strings.TrimPrefix(e.err.Error(), "dlock: "))
	return b.String()
}

func (e *opError) Unwrap() error { return e.err }

// Wrap names the operation, the lock's shape and its name on err, once, in
// the one format of every backend: `dlock: <op> <shape> "<name>": <reason>`
// (acquire mutex "stock:1": not acquired; shape "" leaves the shape out,
// for a call that does not know it). An error that already names its call
// is returned as it is.
func Wrap(op, shape, name string, err error) error {
	if _, ok := err.(*opError); ok {
		return err
	}
	return &opError{op: op, shape: shape, name: name, onLock: true, err: err}
}

// WrapCall names a call that is not on one lock on err, once: `dlock:
// <call>: <reason>`, where call says what was called and on what, if
// anything (new client: invalid duration: TTL 1ms (want >= 3ms); dial
// zookeeper "127.0.0.1:1": ...). An error that already names its call is
// returned as it is.
func WrapCall(call string, err error) error {
	if _, ok := err.(*opError); ok {
		return err
	}
	return &opError{op: call, err: err}
}

// renamed is err, a loss found while holding (Wrap("hold", ...)), as the
// error of the call op that reports it; another error is returned as it is.
func renamed(op string, err error) error {
	if e, ok := err.(*opError); ok && e.op != op {
		return &opError{op: op, shape: e.shape, name: e.name, onLock: e.onLock, err: e.err}
	}
	return err
}

// StoreErr is Wrap for an error from the store: when ctx ended the call, it
// is ctx's error that is wrapped.
func StoreErr(ctx context.Context, op, shape, name string, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || isTimeout(err)) {
		return Wrap(op, shape, name, ctx.Err())
	}
	return Wrap(op, shape, name, err)
}

// errNilLease is what the methods of a nil *Lease return.
var errNilLease = fmt.Errorf("%w (nil lease)", ErrNotHeld)

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// MaxNameLen is the longest lock name accepted, in bytes.
const MaxNameLen = 1024

// CheckName returns an error wrapping ErrInvalidName unless name is a valid
// lock name (1 to MaxNameLen bytes).
func CheckName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: %d bytes (want 1..%d)", ErrInvalidName, len(name), MaxNameLen)
	}
	return nil
}

// CheckContext returns an error wrapping ErrInvalidArgument if ctx is nil
// (every call that takes a ctx refuses a nil one, rather than panic).
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalidArgument)
	}
	return nil
}
