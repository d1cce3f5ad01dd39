package dlock

import (
	"context"
	"strconv"
	"time"
)

var (
	fairAcquire = withLibs("fair_acquire.lua", "fence.lua", "lib.lua", "fair_lib.lua")
	fairRelease = withLibs("fair_release.lua", "fence.lua", "lib.lua", "fair_lib.lua")
	fairLeave   = withLibs("fair_leave.lua", "fence.lua", "lib.lua", "fair_lib.lua")
)

// FairLock is a reentrant lock granted in arrival order (FIFO): no waiter
// starves, at the price of some throughput (a waiter cannot overtake, even
// when it could run right now).
//
// Waiters queue in Redis. A release hands the lock straight to the first
// live waiter (it owns the lock before it wakes) and wakes only that waiter,
// so a contended hand-off costs the release, one message and the waiter's
// claim: no thundering herd, no race to the key.
//
// A waiting Acquire refreshes its place every third of its QueueTimeout
// (default DefaultQueueTimeout, 5 s); a waiter that stops refreshing
// (process killed, paused, cut off) is evicted once its timeout has passed,
// and a lock handed to it expires by then, so a dead waiter blocks the queue
// for seconds. A waiter that gives up (ctx done, Wait ran out, error) leaves
// the queue at once, and gives back a hand-off that raced with its giving up.
// An Acquire with Wait(0) never queues: it gets the lock only if it is free
// and nobody waits.
//
// Like Lock, it is reentrant through the Lease's Context (re-entry does not
// queue), and its key is a Lock-shaped hash: a Lock on the same name would
// ignore the queue, so give every name one shape.
type FairLock struct {
	c    *Client
	name string
}

// FairLock returns the FairLock called name. The name is checked by Acquire.
func (c *Client) FairLock(name string) *FairLock { return &FairLock{c: c, name: name} }

// Name returns the lock's name.
func (f *FairLock) Name() string { return f.name }

// Acquire takes or re-enters the lock in arrival order; see Locker and
// FairLock.
func (f *FairLock) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return f.c.acquire(ctx, fairShape{f}, opts)
}

// fairKeys are a FairLock's keys: the Lock-shaped hash, its queue and the
// waiters' deadlines.
type fairKeys struct {
	lockKeys
	queue, timeouts string
}

func (c *Client) fairKeys(name string) fairKeys {
	k := c.keys(name)
	return fairKeys{lockKeys: k, queue: k.lock + ":queue", timeouts: k.lock + ":timeouts"}
}

type fairShape struct{ f *FairLock }

func (s fairShape) kind() string     { return "fair" }
func (s fairShape) lockName() string { return s.f.name }

// keys are the lock's keys, with the wake channel of this Client's waiters:
// a hand-off is published there, not to every Client.
func (s fairShape) keys() lockKeys {
	k := s.f.c.keys(s.f.name)
	k.wake += ":" + s.f.c.sub.id
	return k
}

func (s fairShape) attempt(owner string, ttl time.Duration, meta string) attempt {
	return attempt{owner: owner, token: owner, op: newOpID(), ttl: ttl, meta: meta}
}

func (s fairShape) acquireCall(a attempt) scriptCall {
	k := s.f.c.fairKeys(s.f.name)
	return scriptCall{fairAcquire, []string{k.lock, k.fence, k.queue, k.timeouts},
		[]any{a.owner, a.op, ms(a.ttl), a.meta, ms(s.f.c.fenceTTL), ms(a.queue), k.wake, s.f.c.sub.id}}
}

// queueMember is the attempt's member of a queue (see lua/fair_lib.lua).
func (c *Client) queueMember(a attempt) string {
	return a.op + "|" + a.owner + "|" + strconv.FormatInt(ms(a.ttl), 10) + "|" + c.sub.id + "|" + a.meta
}

func (s fairShape) leaveCall(a attempt) scriptCall {
	k := s.f.c.fairKeys(s.f.name)
	return scriptCall{fairLeave, []string{k.lock, k.fence, k.queue, k.timeouts},
		[]any{a.owner, a.op, s.f.c.queueMember(a), k.wake, ms(s.f.c.fenceTTL)}}
}

func (s fairShape) holdID(a attempt) string { return s.keys().lock + "|" + a.owner }

func (s fairShape) ops(a attempt) holdOps {
	return fairOps{&keyOps{c: s.f.c, keys: s.f.c.keys(s.f.name), holder: a.owner, extendScript: lockExtend, owned: lockOwned}, s.f}
}

// fairOps is a Lock's key operations with a release that hands the lock on.
type fairOps struct {
	*keyOps
	f *FairLock
}

func (o fairOps) release(ctx context.Context, op string) (releaseResult, error) {
	k := o.c.fairKeys(o.f.name)
	call := scriptCall{fairRelease, []string{k.lock, k.fence, k.queue, k.timeouts},
		[]any{o.holder, op, k.wake, ms(o.c.fenceTTL)}}
	n, err := call.run(ctx, o.c.rdb).Int64()
	return releaseResult(n), err
}
