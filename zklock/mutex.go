package zklock

import (
	"context"

	"github.com/dlockgo/dlock"
)

// Mutex is a lock with one holder, granted in arrival order, not reentrant
// (a second Acquire by its holder waits like anyone's).
type Mutex struct {
	c   *Client
	req request
}

// Mutex returns the lock name as a mutex. It excludes the Lock, the
// RWLock and the MultiLock members of the same name as a writer would.
func (c *Client) Mutex(name string) *Mutex {
	return &Mutex{c: c, req: request{shape: "mutex", family: familyLock, name: name, kind: kindWrite}}
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.req.name }

// Acquire takes the lock. It waits (see dlock.Wait) in line behind the
// nodes queued before it, and returns the Lease; an error wrapping
// dlock.ErrNotAcquired when the wait ran out, ctx's error when ctx ended
// first, dlock.ErrClosed after Close, or a ZooKeeper error. A waiter that
// gives up deletes its node before Acquire returns (or, if ZooKeeper does
// not answer within a second, in the background). dlock.LeaseTime sets a
// fixed lease (ended on the client's clock, its node then deleted);
// without it the lease lasts as long as the session. dlock.QueueTimeout
// shorter than the session timeout is refused (see the package doc).
func (m *Mutex) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	r := m.req
	return m.c.acquire(ctx, &r, opts)
}

// Lock is a reentrant lock: an Acquire with a context carrying the
// holder's owner (its Lease's Context) re-enters at once with the same
// token, and the lock is free once every Lease is unlocked. Reentrancy is
// per Client (another Client is another process), and the re-entries are
// counted by the Client, not in ZooKeeper.
type Lock struct {
	c   *Client
	req request
}

// Lock returns the lock name as a reentrant lock. It excludes the Mutex,
// the RWLock and the MultiLock members of the same name.
func (c *Client) Lock(name string) *Lock {
	return &Lock{c: c, req: request{shape: "lock", family: familyLock, name: name, kind: kindWrite, reentrant: true}}
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.req.name }

// Acquire takes the lock, or re-enters it when ctx carries the owner that
// holds it through this Client: then a longer dlock.LeaseTime extends the
// hold's fixed lease (past 5/12 of the session timeout, a lease that was
// shorter is refused with dlock.ErrInvalidDuration, as Lease.Extend is), a
// dlock.MaxHold caps the hold, and the other options change nothing; see
// Mutex.Acquire. While another
// Acquire of the same owner and lock is in progress (two goroutines of one
// owner), it waits for that one to end, whatever its own Wait, and then
// re-enters the lock if that one took it. An owner that
// holds the name otherwise (a read side, a write side, a MultiLock member)
// gets dlock.ErrUpgrade or dlock.ErrInvalidArgument at once: it would wait
// for itself.
func (l *Lock) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	r := l.req
	return l.c.acquire(ctx, &r, opts)
}
