package dlock

import (
	"context"
	"strings"
	"time"

	"github.com/dlockgo/dlock/seam"
)

// mutexInspector is a Mutex's answer to Inspect.
var mutexInspector = inspector{withLibs("mutex_inspect.lua", "lib.lua", "inspect_lib.lua"), func(c *Client, name string) []string {
	k := c.queueKeys(name)
	return []string{k.lock, k.fence, k.queue, k.timeouts}
}}

// mutex is a Client's Mutex.
type mutex struct {
	c  *Client
	k  queueKeys
	sp shapeSpec
}

// Mutex returns the Mutex called name: the minimal correct lock (one
// string key, SET NX PX, a random token per acquisition, compare-and-delete
// release), with a waiter queue: a release hands a contended Mutex straight
// to the first live waiter (see the queue notes in queue.go). It is not
// fair: a free Mutex goes to whoever asks, queue or not (it is free with
// waiters queued only after a holder's lease ran out). It is not reentrant:
// acquiring a Mutex that the same owner already holds waits like anyone
// else (and, with no Wait, until ctx is done). Use Lock for reentrancy,
// FairLock for strict arrival order.
//
// An uncontended acquisition and its release are one round trip each (and
// the calls of concurrent callers of one Client share pipelines). The name
// is checked by Acquire. A Mutex costs two small allocations to make: make
// one per acquisition (a lock per order id) or keep one, as suits the
// caller.
func (c *Client) Mutex(name string) Locker {
	m := &mutex{c: c, k: c.queueKeys(name)}
	m.k.box()
	m.sp = shapeSpec{kind: "mutex", name: name, keys: m.k.waiting(), wake: wakeHandOff, intReply: true, replicaAck: true, queue: &m.k, leave: mutexLeaveCall}
	return m
}

// Name returns the lock's name.
func (m *mutex) Name() string { return m.sp.name }

// Acquire takes the mutex; see Locker.
func (m *mutex) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return m.c.acquire(ctx, mutexShape{m}, opts)
}

// mutexLeaveCall is the call by which a's Acquire leaves the queue.
func mutexLeaveCall(a *attempt) scriptCall {
	c, k := a.c, a.k
	return scriptCall{mutexLeave, append(k.begin(mutexLeave, 3), a.args.token, a.queueMember(), c.argCheck)}
}

type mutexShape struct{ m *mutex }

func (s mutexShape) spec() *shapeSpec { return &s.m.sp }

func (s mutexShape) acquireCall(a *attempt) scriptCall {
	return scriptCall{mutexAcquire, append(s.m.k.begin(mutexAcquire, 3), a.mutexValue(), a.args.lease, a.queueSpec())}
}

// holdID is "": a Mutex grant never joins another (its token is its own).
func (s mutexShape) holdID(a *attempt) string { return "" }

func (s mutexShape) ops(a *attempt) holdOps { return (*mutexOps)(a) }

// mutexOps are a Mutex grant's operations: the attempt that won it.
type mutexOps attempt

func (o *mutexOps) renewCalls(ttl time.Duration) []scriptCall {
	return []scriptCall{extendCall(mutexExtend, o.k.args[0], o.args.token, o.c.ttlArg(ttl))}
}

func (o *mutexOps) extend(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := o.c.callSettled(ctx, extendCall(mutexExtend, o.k.args[0], o.args.token, o.c.ttlArg(ttl)))
	return n == 1, err
}

// releaseCall needs no operation id: the token makes it idempotent.
func (o *mutexOps) releaseCall() scriptCall {
	c := o.c
	return scriptCall{mutexRelease, append(o.k.begin(mutexRelease, 2), o.args.token, c.argCheck)}
}

func (o *mutexOps) releaseCalls() []scriptCall { return []scriptCall{o.releaseCall()} }

func (o *mutexOps) release(ctx context.Context) (seam.Released, error) {
	n, err := o.c.callSettled(ctx, o.releaseCall())
	return seam.Released(n), err
}

func (o *mutexOps) verify(ctx context.Context) (bool, error) {
	return verifyOwned(ctx, o.c, o.k.lock, "", func(v string) bool { return strings.HasPrefix(v, o.token) })
}
