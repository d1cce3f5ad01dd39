package etcdlock

import (
	"context"

	"github.com/dlockgo/dlock"
)

// Lock is a reentrant exclusive lock granted in arrival order: acquiring
// it with a context that carries the holder's owner (the Context of one of
// its Leases) re-enters at once, without a write to etcd, and returns the
// holder's token; the lock is free once every Lease of the owner is
// unlocked. A re-entry is recognised once the owner's first acquisition has
// returned (two concurrent first acquisitions of one owner queue like two
// owners).
type Lock struct {
	c    *Client
	name string
}

// Lock returns the reentrant Lock called name. The name is checked by
// Acquire.
func (c *Client) Lock(name string) *Lock { return &Lock{c: c, name: name} }

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Acquire takes or re-enters the lock; see dlock.Locker.
func (l *Lock) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	return l.c.acquire(ctx, l.c.exclusive("lock", l.name, true), opts)
}
