package dlock

import "context"

// fairLock is a Client's FairLock.
type fairLock struct{ sh *reentrantShape }

// FairLock returns the FairLock called name: a reentrant lock granted in
// strict arrival order (FIFO): no
// waiter starves, and no caller overtakes a waiter, even when the lock is
// free because a holder's lease ran out (a Lock or Mutex then goes to
// whoever asks first). An Acquire with Wait(0) never queues: it gets the
// lock only if it is free and nobody waits.
//
// Waiters queue in Redis and a release hands the lock to the first live
// waiter, as for Lock and Mutex (see the queue notes in queue.go): a
// contended hand-off costs the release and one message, with no thundering
// herd and no race to the key. A waiter whose Client does not listen (gone,
// cut off) is passed over and keeps its place until its QueueTimeout
// (default 5 s); a stuck one holds the queue up for at
// most that long.
//
// Like Lock, it is reentrant through the Lease's Context (re-entry does not
// queue). Its key is a Lock-shaped hash marked "fair": give every name one
// shape. The name is checked by Acquire.
func (c *Client) FairLock(name string) Locker {
	return &fairLock{c.reentrant(name, true)}
}

// Name returns the lock's name.
func (f *fairLock) Name() string { return f.sh.sp.name }

// Acquire takes or re-enters the lock in arrival order; see Locker and
// Client.FairLock.
func (f *fairLock) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return f.sh.c.acquire(ctx, f.sh, opts)
}
