package zklock

import (
	"context"

	"github.com/dlockgo/dlock"
)

// Semaphore is a lock of up to permits holders at once, granted in
// arrival order.
type Semaphore struct {
	c   *Client
	req request
}

// Semaphore returns the lock name as a semaphore of permits holders
// (permits < 1 makes Acquire fail with dlock.ErrInvalidArgument). Every
// client must use the same permits for one name. It is a lock of its own,
// apart from the Mutex, Lock, RWLock and MultiLock of the same name.
// Waiters watch the semaphore's directory, so each release wakes every
// waiter.
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	return &Semaphore{c: c, req: request{shape: "semaphore", family: familySemaphore, name: name, kind: kindPermit, permits: permits}}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.req.name }

// Acquire takes a permit; see Mutex.Acquire.
func (s *Semaphore) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	r := s.req
	return s.c.acquire(ctx, &r, opts)
}
