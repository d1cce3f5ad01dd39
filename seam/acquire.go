package seam

import (
	"context"
	"errors"
	"time"
)

// Request is an Acquire call as a backend hands it to Keeper.Begin: which
// lock, and what the backend refuses.
type Request struct {
	Shape string // mutex, lock, fair, rw_read, rw_write, semaphore, multi
	Name  string // the lock's name (a MultiLock's: its names joined by ",")
	// Check returns why the call's names and arguments are invalid (an
	// error wrapping ErrInvalidName or ErrInvalidArgument); nil:
	// CheckName(Name).
	Check func() error
	// Limit returns why the backend refuses the call's options (nil: it
	// takes every option Portable allows).
	Limit func(Options) error
	// Closed reports whether the backend's client is closed (nil: the
	// backend checks it itself).
	Closed func() bool
}

// Acquisition is one Acquire call of a backend, begun by Keeper.Begin and
// ended by End: the one start and end of every backend's Acquire.
type Acquisition struct {
	Options Options
	// Store is the context the call's store requests run under: the
	// caller's ctx, with the Observer's span when it is an
	// observe.Tracer. A grant's Lease is made under the caller's ctx.
	Store context.Context
	Start time.Time // when the call began, on the real clock
	call  acquireCall
}

// Begin begins an Acquire call of r: it starts the call's span and checks,
// in this order, ctx (not nil), the names and arguments (r.Check), the
// options (ParseOptions, then r.Limit, or Portable if r.Limit is nil),
// that the client is open (r.Closed) and that ctx is not done. An invalid
// call changes nothing: Begin reports it as the call's AcquireEvent and
// returns it as Acquire's error (`dlock: acquire <shape> "<name>": ...`).
// Otherwise the caller must end the call with End, exactly once.
func (k *Keeper[O]) Begin(ctx context.Context, r Request, opts []Option) (Acquisition, error) {
	return k.k.begin(ctx, r, opts)
}

func (k *keeper) begin(ctx context.Context, r Request, opts []Option) (Acquisition, error) {
	a := Acquisition{Start: time.Now()}
	a.Store, a.call = k.startAcquire(ctx, r.Shape, r.Name)
	err := CheckContext(ctx)
	switch {
	case err != nil:
	case r.Check != nil:
		err = r.Check()
	default:
		err = CheckName(r.Name)
	}
	if err == nil {
		a.Options, err = ParseOptions(opts)
	}
	switch {
	case err != nil:
	case r.Limit != nil:
		err = r.Limit(a.Options)
	default:
		err = a.Options.Portable()
	}
	switch {
	case err != nil:
	case r.Closed != nil && r.Closed():
		err = ErrClosed
	default:
		err = ctx.Err()
	}
	if err != nil {
		return Acquisition{}, a.End(nil, err)
	}
	return a, nil
}

// Until is when the call's wait ends on the real clock: Start plus Wait;
// zero for a wait as long as ctx allows (no Wait option).
func (a *Acquisition) Until() time.Time {
	if a.Options.Wait < 0 {
		return time.Time{}
	}
	return a.Start.Add(a.Options.Wait)
}

// End ends the call with its outcome: l, the Lease it returns (the first
// of several), or err. It reports the call's AcquireEvent and returns err
// as Acquire's error, named once: an error that names its call already
// (Wrap, StoreErr, perhaps with a detail added) is returned as it is,
// another is wrapped with the call's shape and name; nil when err is nil.
func (a *Acquisition) End(l *Lease, err error) error {
	if err != nil && !namesCall(err) {
		err = Wrap("acquire", a.call.shape, a.call.name, err)
	}
	a.call.done(l, err)
	return err
}

// namesCall reports whether err names its call (Wrap, WrapCall), perhaps
// under a detail added to it.
func namesCall(err error) bool {
	var e *opError
	return errors.As(err, &e)
}
