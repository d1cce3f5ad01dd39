package dlock

import "context"

// Locker is one lock of any shape or backend.
type Locker interface {
	// Name returns the lock's name.
	Name() string
	// Acquire takes the lock (see Option for wait, lease and the rest). It
	// returns the Lease, or an error wrapping ErrNotAcquired when the wait
	// ran out, ctx.Err() when ctx was done first, ErrClosed when the lock's
	// client is closed (also while Acquire waits: Close ends it at once), or
	// another sentinel error.
	Acquire(ctx context.Context, opts ...Option) (*Lease, error)
}
