package etcdlock

import (
	"context"

	"github.com/dlockgo/dlock"
)

// Lock is a reentrant exclusive lock granted in arrival order: acquiring
// it with a context that carries the holder's owner (the Context of one of
// its Leases) re-enters at once, without a write to etcd (but for a
// dlock.LeaseTime longer than the hold's fixed lease has left, which
// extends it, as Lease.Extend does; a dlock.MaxHold caps the hold), and
// returns the holder's token; the lock is free once every Lease of the owner is
// unlocked. Two acquisitions of one owner at once (two goroutines under
// one Lease's Context) do not queue behind each other: the second waits
// for the first and joins its hold (or, if the first failed, tries
// itself). Re-entries are counted by the Client that granted the hold: a
// re-entry through another Client queues like another owner.
type Lock struct {
	c    *Client
	name string
	sh   shape
}

// Lock returns the reentrant Lock called name. The name is checked by
// Acquire.
func (c *Client) Lock(name string) *Lock {
	sh := c.exclusive("lock", name, func(owner string) string { return holdKey("lock", name, owner) })
	sh.refuse = (*attempt).notInMulti
	return &Lock{c: c, name: name, sh: sh}
}

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Acquire takes or re-enters the lock; see dlock.Locker.
func (l *Lock) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	return l.c.acquire(ctx, l.sh, opts)
}
