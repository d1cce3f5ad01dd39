package zklock

import (
	"context"
	"slices"
	"strings"

	"github.com/dlockgo/dlock"
)

// MultiLock locks several names as one: it is acquired only when every
// name is, and an Acquire that gives up (or fails) leaves none of them
// taken.
//
// One transaction queues a node in every member's directory, so the
// MultiLock has one place in each member's queue and the same fencing
// token (the transaction's zxid, larger than every token granted before on
// any member) on all of them. It is granted once it is first in every
// queue. Two MultiLocks over overlapping names, or a MultiLock and the
// Locks of its members, never deadlock each other: every node waits only
// for nodes made before it, so whatever was queued first is granted first
// in every queue it shares. While it waits for a later member it keeps its
// place (and, when it is first there, the lock) in the earlier ones, as
// any waiter in a queue does.
//
// A member is an exclusive lock: a MultiLock excludes the Mutex, Lock,
// RWLock and other MultiLocks of each of its names. A MultiLock is
// reentrant (an Acquire whose ctx carries its owner re-enters it), but,
// unlike on Redis, it does not re-enter the members one by one: an owner
// that holds one of its names through a Lock or an RWLock gets
// dlock.ErrInvalidArgument (or dlock.ErrUpgrade for a read hold) at once
// rather than waiting for itself, and so does a Lock or an RWLock of a
// member acquired under the MultiLock's Context.
//
// The lease is lost as soon as any member's node is (deleted, its session
// expired).
type MultiLock struct {
	c   *Client
	req request
}

// MultiLock returns the lock over names (in any order). The names are
// checked by Acquire: at least one, each a valid name, no duplicates.
func (c *Client) MultiLock(names ...string) *MultiLock {
	sorted := slices.Sorted(slices.Values(names))
	if sorted == nil {
		sorted = []string{}
	}
	return &MultiLock{c: c, req: request{shape: "multi", family: familyLock, name: strings.Join(sorted, ","), names: sorted, kind: kindWrite, reentrant: true}}
}

// Name returns the member names in canonical order, joined by ",".
func (m *MultiLock) Name() string { return m.req.name }

// Acquire takes every member or none; see MultiLock and Mutex.Acquire.
func (m *MultiLock) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	r := m.req
	return m.c.acquire(ctx, &r, opts)
}
