package dlockfake

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// The shapes. Each is granted in arrival order: a waiter is granted before
// any that came after it and needs what it needs (a try with waiters
// queued in its way is refused), so faults and waits end the same way on
// every run. Names are checked by Acquire.

// locker is a Locker of one request.
type locker struct {
	c *Client
	r *request
}

func (l *locker) Name() string { return l.r.name }

// Acquire takes the lock; see dlock.Locker.
func (l *locker) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	return l.c.acquire(ctx, l.r, opts)
}

func (c *Client) one(shape, name string, m seam.Mode, family string) dlock.Locker {
	return &locker{c, &request{shape: shape, name: name, names: []string{name}, mode: m, family: family}}
}

// Mutex returns the exclusive lock name. It is not reentrant: acquiring it
// with the holder's context waits like anyone else.
func (c *Client) Mutex(name string) dlock.Locker { return c.one("mutex", name, seam.Exclusive, "") }

// Lock returns the reentrant exclusive lock name: acquiring it with a
// context that carries the holder's owner (one of its Leases' Context)
// re-enters at once and returns the holder's token; the lock is free once
// every Lease of the owner is unlocked. Re-entries go through the Client
// that granted the hold (through another, the owner queues like anyone).
// Lock and FairLock of one name are one lock.
func (c *Client) Lock(name string) dlock.Locker { return c.one("lock", name, seam.Exclusive, "lock") }

// FairLock returns the reentrant lock name, granted in strict arrival
// order: the Lock of the same name (every shape of the fake is granted so).
func (c *Client) FairLock(name string) dlock.Locker {
	return c.one("fair", name, seam.Exclusive, "lock")
}

// MultiLock returns the lock over names (in any order): it is granted when
// every name is, at once, and never holds some of them only; it excludes
// the other shapes of its names. It re-enters like Lock (the same names,
// under its owner's context); its owner holding one of the names through
// another lock is refused with dlock.ErrInvalidArgument (it would wait for
// itself). The names are checked by Acquire: at least one, each valid, no
// duplicates.
func (c *Client) MultiLock(names ...string) dlock.Locker {
	sorted := slices.Sorted(slices.Values(names))
	name := strings.Join(sorted, ",")
	check := func() error {
		if len(sorted) == 0 {
			return fmt.Errorf("%w: a MultiLock needs at least one name", dlock.ErrInvalidArgument)
		}
		for i, n := range sorted {
			if err := seam.CheckName(n); err != nil {
				return err
			}
			if i > 0 && n == sorted[i-1] {
				return fmt.Errorf("%w: name %q appears twice in a MultiLock", dlock.ErrInvalidArgument, n)
			}
		}
		return nil
	}
	return &locker{c, &request{shape: "multi", name: name, names: sorted, mode: seam.Exclusive, family: "multi\x00" + name, check: check}}
}

// RWLock is a read-write lock: any number of readers share it, a writer
// holds it alone; a waiting writer holds back the readers that come after
// it. Both sides re-enter like Lock; the writer may take the read side
// (downgrade), a reader asking for the write side is refused with
// dlock.ErrUpgrade.
type RWLock struct {
	c    *Client
	name string
}

// RWLock returns the read-write lock name.
func (c *Client) RWLock(name string) *RWLock { return &RWLock{c, name} }

// Name returns the lock's name.
func (rw *RWLock) Name() string { return rw.name }

// ReadLock returns the read side: its Acquire takes a shared hold.
func (rw *RWLock) ReadLock() dlock.Locker {
	return rw.c.one("rw_read", rw.name, seam.Shared, "rw_read")
}

// WriteLock returns the write side: its Acquire takes the exclusive hold.
func (rw *RWLock) WriteLock() dlock.Locker {
	return rw.c.one("rw_write", rw.name, seam.Exclusive, "rw_write")
}

// Semaphore lets up to a number of holders in at once, each with a Lease
// of its own. The permit count lives in the Service, as in the real
// stores: the first Acquire sets it; an Acquire whose Semaphore has
// another count fails with dlock.ErrInvalidArgument and takes nothing (a
// waiter whose count changed meanwhile too, unless its own SetPermits
// changed it); SetPermits changes it for every user.
type Semaphore struct {
	c       *Client
	name    string
	permits *seam.Permits
}

// Semaphore returns the semaphore name with permits permits (checked by
// Acquire).
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	return &Semaphore{c, name, seam.NewPermits(permits)}
}

// Name returns the semaphore's name.
func (sem *Semaphore) Name() string { return sem.name }

// Acquire takes one permit; see dlock.Locker.
func (sem *Semaphore) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	r := &request{shape: "semaphore", name: sem.name, names: []string{sem.name}, mode: seam.Permit, permits: sem.permits}
	r.check = func() error {
		if err := seam.CheckName(sem.name); err != nil {
			return err
		}
		if n := sem.permits.Count(); n < 1 {
			return fmt.Errorf("%w: %d permits (want at least 1)", dlock.ErrInvalidArgument, n)
		}
		return nil
	}
	return sem.c.acquire(ctx, r, opts)
}

// SetPermits sets the semaphore's permit count in the Service to n (at
// least 1), for every user, and makes this Semaphore count against it.
// Permits held beyond a lowered count stay held until released.
func (sem *Semaphore) SetPermits(ctx context.Context, n int) error {
	err := seam.CheckContext(ctx)
	switch {
	case err != nil:
	case seam.CheckName(sem.name) != nil:
		err = seam.CheckName(sem.name)
	case n < 1:
		err = fmt.Errorf("%w: %d permits (want at least 1)", dlock.ErrInvalidArgument, n)
	case sem.c.isClosed():
		err = dlock.ErrClosed
	}
	if err != nil {
		return seam.Wrap("set permits", "semaphore", sem.name, err)
	}
	s := sem.c.svc
	return sem.permits.Set(n, func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.counts[sem.name] = n
		s.changedLocked()
		return nil
	})
}
