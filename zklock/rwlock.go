package zklock

import (
	"context"

	"github.com/dlockgo/dlock"
)

// RWLock is a read-write lock: readers share it, a writer holds it alone.
//
//   - Both sides are reentrant through the Lease's Context, like Lock
//     (counted by the Client, per Client).
//   - The writer may also take the read side (downgrade: take the read
//     lock, then unlock the write lock): it is granted at once, also with
//     writers queued, and they wait for both sides. The reverse, read to write, is
//     refused at once with dlock.ErrUpgrade: two readers upgrading would
//     wait for each other forever.
//   - Readers wait for the writers queued before them, writers for everyone
//     queued before them: no writer starves, and waiters are granted in
//     arrival order.
type RWLock struct {
	c    *Client
	name string
}

// RWLock returns the lock name as a read-write lock. It excludes the
// Mutex, the Lock and the MultiLock members of the same name as a writer
// would.
func (c *Client) RWLock(name string) *RWLock { return &RWLock{c: c, name: name} }

// Name returns the lock's name.
func (rw *RWLock) Name() string { return rw.name }

// ReadLock returns the read side: its Acquire takes or re-enters a shared
// hold; see Mutex.Acquire.
func (rw *RWLock) ReadLock() dlock.Locker {
	return side{rw.c, request{shape: "rw_read", family: familyLock, name: rw.name, kind: kindRead, reentrant: true}}
}

// WriteLock returns the write side: its Acquire takes or re-enters the
// exclusive hold; see Mutex.Acquire. An owner holding the read side gets
// dlock.ErrUpgrade at once.
func (rw *RWLock) WriteLock() dlock.Locker {
	return side{rw.c, request{shape: "rw_write", family: familyLock, name: rw.name, kind: kindWrite, reentrant: true}}
}

// side is one side of an RWLock.
type side struct {
	c   *Client
	req request
}

func (s side) Name() string { return s.req.name }

func (s side) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	r := s.req
	return s.c.acquire(ctx, &r, opts)
}
