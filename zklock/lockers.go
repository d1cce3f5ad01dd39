package zklock

import (
	"context"

	"github.com/dlockgo/dlock"
)

// locker is one named lock of one shape.
type locker struct {
	c   *Client
	req request
}

func (l *locker) Name() string { return l.req.name }

// Acquire takes the lock. It waits (see dlock.Wait) in line behind the
// nodes queued before it, and returns the Lease; an error wrapping
// dlock.ErrNotAcquired when the wait ran out, ctx's error when ctx ended
// first, dlock.ErrClosed after Close, or a ZooKeeper error. A waiter that
// gives up deletes its node. dlock.LeaseTime sets a fixed lease (ended on
// the client's clock, its node then deleted); without it the lease lasts
// as long as the session.
func (l *locker) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	r := l.req
	return l.c.acquire(ctx, &r, opts)
}

// Mutex returns the lock name as a mutex: one holder, granted in arrival
// order, not reentrant (a second Acquire by its holder waits like anyone).
func (c *Client) Mutex(name string) dlock.Locker {
	return &locker{c: c, req: request{shape: "mutex", family: "lock", name: name, kind: kindWrite}}
}

// Lock returns the lock name as a reentrant lock: an Acquire with a context
// carrying the holder's owner (its Lease's Context) re-enters at once with
// the same token, and the lock is free once every Lease is unlocked.
// Reentrancy is per Client: another Client is another process.
func (c *Client) Lock(name string) dlock.Locker {
	return &locker{c: c, req: request{shape: "lock", family: "lock", name: name, kind: kindWrite}}
}

// RWLock is a read-write lock: readers share it, a writer holds it alone.
// Readers wait for the writers queued before them, writers for everyone
// queued before them (no writer starves).
type RWLock struct {
	c    *Client
	name string
}

// RWLock returns the lock name as a read-write lock. It excludes the Mutex
// and Lock of the same name as a writer would.
func (c *Client) RWLock(name string) *RWLock { return &RWLock{c: c, name: name} }

// Read returns the read side. An owner holding the write side may take the
// read side too.
func (rw *RWLock) Read() dlock.Locker {
	return &locker{c: rw.c, req: request{shape: "read", family: "lock", name: rw.name, kind: kindRead}}
}

// Write returns the write side. An owner holding the read side gets
// dlock.ErrUpgrade at once (waiting would deadlock).
func (rw *RWLock) Write() dlock.Locker {
	return &locker{c: rw.c, req: request{shape: "write", family: "lock", name: rw.name, kind: kindWrite}}
}

// Semaphore returns the lock name as a semaphore of permits holders
// (permits < 1 makes Acquire fail with dlock.ErrInvalidArgument). Every
// client must use the same permits for one name. Waiters watch the
// semaphore's directory, so each release wakes every waiter.
func (c *Client) Semaphore(name string, permits int) dlock.Locker {
	return &locker{c: c, req: request{shape: "semaphore", family: "semaphore", name: name, kind: kindPermit, permits: permits}}
}
