package dlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockgo/dlock/seam"
)

// Do runs fn under locker: it acquires with opts, runs fn with the lease's
// Context and the Lease, and always releases (also when fn panics; the panic
// goes on after the release). It returns fn's error, the release's, or, when
// both failed, one error wrapping both on one line (`<fn's> (and <the
// release's>)`; fn's alone when both report the loss): if the lock was lost at any point, the result wraps
// ErrLockLost even when fn returned nil, so a section that ran without
// exclusivity never looks like a success. If the lock is not acquired, fn does not run and the
// acquire error (ErrNotAcquired, ctx.Err(), ...) is returned.
func Do(ctx context.Context, locker Locker, fn func(ctx context.Context, l *Lease) error, opts ...Option) error {
	switch {
	case locker == nil:
		return seam.WrapCall("do", fmt.Errorf("%w: nil locker", ErrInvalidArgument))
	case fn == nil:
		return wrap("do", "", locker.Name(), fmt.Errorf("%w: nil function", ErrInvalidArgument))
	}
	l, err := locker.Acquire(ctx, opts...)
	if err != nil {
		return err
	}
	unlock := func() error {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		defer cancel()
		return l.Unlock(uctx)
	}
	ran := false
	defer func() {
		if !ran {
			_ = unlock()
		}
	}()
	ferr := fn(l.Context(), l)
	ran = true
	uerr := unlock()
	switch {
	case ferr == nil:
		return uerr
	case uerr == nil, errors.Is(ferr, ErrLockLost) && errors.Is(uerr, ErrLockLost):
		return ferr // a loss fn saw already is said once
	}
	return &bothErr{ferr, uerr}
}

// bothErr is a section's error and its release's on one line, the
// release's without a second "dlock: ": `<fn's> (and <the release's>)`.
type bothErr struct{ fn, release error }

func (e *bothErr) Error() string {
	return e.fn.Error() + " (and " + strings.TrimPrefix(e.release.Error(), "dlock: ") + ")"
}

func (e *bothErr) Unwrap() []error { return []error{e.fn, e.release} }

// unlockTimeout bounds a release sent without a caller's deadline (Do's
// release, leaving a queue).
const unlockTimeout = 5 * time.Second
