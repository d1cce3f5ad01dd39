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
}

// Mutex returns the Mutex called name. The name is checked by Acquire.
func (c *Client) Mutex(name string) *Mutex { return &Mutex{c: c, name: name, k: c.queueKeys(name)} }

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Acquire takes the mutex; see Locker.
func (m *Mutex) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return m.c.acquire(ctx, mutexShape{m}, opts)
}

type mutexShape struct{ m *Mutex }

func (s mutexShape) spec() shapeSpec {
	return shapeSpec{kind: "mutex", name: s.m.name, keys: s.m.k.waiting(), wake: wakeHandOff, replicaAck: true, leave: s.leaveCall}
}

func (s mutexShape) attempt(owner string, ttl time.Duration, meta string) attempt {
	return attempt{owner: owner, token: newToken(), op: newOpID(), ttl: ttl, meta: meta}
}

func (s mutexShape) acquireCall(a attempt) scriptCall {
	return scriptCall{mutexAcquire, s.m.k.list(), s.m.c.queueArgs(a, s.m.k)}
}

func (s mutexShape) leaveCall(a attempt) scriptCall {
	k := s.m.k
	return scriptCall{mutexLeave, k.list(), []any{a.token, s.m.c.queueMember(a), k.wake, ms(s.m.c.fenceTTL), s.m.c.listenCheck()}}
}

func (s mutexShape) holdID(a attempt) string { return s.m.k.lock + "|" + a.token }

func (s mutexShape) ops(a attempt) holdOps {
	k := s.m.k
	return queueOps{&keyOps{c: s.m.c, keys: k.lockKeys, holder: a.token, extendScript: mutexExtend, owned: mutexOwned}, k, mutexRelease}
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
