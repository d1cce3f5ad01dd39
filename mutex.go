package dlock

import (
	"context"
	"strings"
	"time"
)

// Mutex is the minimal correct lock (one string key, SET NX PX, a random
// token per acquisition, compare-and-delete release), with a waiter queue:
// a release hands a contended Mutex straight to the first live waiter (see
// the queue notes in queue.go). It is not fair: a free Mutex goes to whoever
// asks, queue or not (it is free with waiters queued only after a holder's
// lease ran out). It is not reentrant: acquiring a Mutex that the same owner
// already holds waits like anyone else (and, with no Wait, until ctx is
// done). Use Lock for reentrancy, FairLock for strict arrival order.
type Mutex struct {
	c    *Client
	name string
	k    queueKeys
	sp   shapeSpec
}

// Mutex returns the Mutex called name. The name is checked by Acquire.
func (c *Client) Mutex(name string) *Mutex {
	m := &Mutex{c: c, name: name, k: c.queueKeys(name)}
	m.sp = shapeSpec{kind: "mutex", name: name, keys: m.k.waiting(), wake: wakeHandOff, replicaAck: true, leave: mutexShape{m}.leaveCall}
	return m
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Acquire takes the mutex; see Locker.
func (m *Mutex) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return m.c.acquire(ctx, mutexShape{m}, opts)
}

type mutexShape struct{ m *Mutex }

func (s mutexShape) spec() shapeSpec { return s.m.sp }

// attempt: the token is unique to the Acquire call, so its first 16
// characters serve as the call's operation id.
func (s mutexShape) attempt(owner string, ttl time.Duration, meta string) attempt {
	tok := newToken()
	return attempt{owner: owner, token: tok, op: tok[:16], ttl: ttl, meta: meta}
}

func (s mutexShape) acquireCall(a attempt) scriptCall {
	return scriptCall{mutexAcquire, s.m.k.list, s.m.k.acquireArgs(a)}
}

func (s mutexShape) leaveCall(a attempt) scriptCall {
	k := &s.m.k
	return scriptCall{mutexLeave, k.list, []any{a.token, s.m.c.queueMember(a), k.args.wake, k.args.fenceTTL, k.args.check}}
}

// holdID is "": a Mutex grant never joins another (its token is its own).
func (s mutexShape) holdID(a attempt) string { return "" }

func (s mutexShape) ops(a attempt) holdOps {
	k := &s.m.k
	return &queueOps{keyOps{c: s.m.c, keys: k.lockKeys, lockList: k.list[:1], holder: a.token, extendScript: mutexExtend, owned: mutexOwned}, k, mutexRelease, false}
}

// mutexOwned reads a Mutex key and reports whether holder holds it.
func mutexOwned(ctx context.Context, c *Client, key, holder string) (bool, error) {
	v, err := c.rdb.Get(ctx, key).Result()
	if err != nil {
		if isNil(err) {
			return false, nil
		}
		return false, err
	}
	return strings.HasPrefix(v, holder), nil
}
