package dlock

import "context"

// lock is a Client's Lock.
type lock struct{ sh *reentrantShape }

// Lock returns the reentrant Lock called name: a hash of owner, hold count
// and fence, with a waiter queue (a release hands a contended Lock straight
// to the first live waiter; see the queue notes in queue.go). An owner that
// holds it may acquire it again (through the Lease's Context, or any
// context derived from it) without waiting; the count goes up, the same
// fencing token is returned, and the lock is free once every acquisition
// was unlocked. An extra Unlock returns ErrNotHeld. A reentrant acquisition
// joins the outer one's hold: it raises the TTL to at least its own lease
// but does not switch the watchdog on or off. Like a Mutex it is not fair:
// a free Lock goes to whoever asks (see FairLock). The name is checked by
// Acquire.
func (c *Client) Lock(name string) Locker { return &lock{c.reentrant(name, false)} }

// Name returns the lock's name.
func (l *lock) Name() string { return l.sh.sp.name }

// Acquire takes or re-enters the lock; see Locker.
func (l *lock) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return l.sh.c.acquire(ctx, l.sh, opts)
}
