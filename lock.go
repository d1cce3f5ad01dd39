package dlock

import (
	"context"
	"time"
)

// Lock is the reentrant lock: a hash of owner, hold count and fence. An
// owner that holds it may acquire it again (through the Lease's Context, or
// any context derived from it) without waiting; the count goes up, the same
// fencing token is returned, and the lock is free once every acquisition was
// unlocked. An extra Unlock returns ErrNotHeld. A reentrant acquisition
// joins the outer one's hold: it raises the TTL to at least its own lease but
// does not switch the watchdog on or off.
type Lock struct {
	c    *Client
	name string
}

// Lock returns the reentrant Lock called name. The name is checked by Acquire.
func (c *Client) Lock(name string) *Lock { return &Lock{c: c, name: name} }

// Name returns the lock's name.
func (l *Lock) Name() string { return l.name }

// Acquire takes or re-enters the lock; see Locker.
func (l *Lock) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return l.c.acquire(ctx, lockShape{l}, opts)
}

type lockShape struct{ l *Lock }

func (s lockShape) kind() string     { return "lock" }
func (s lockShape) lockName() string { return s.l.name }
func (s lockShape) keys() lockKeys   { return s.l.c.keys(s.l.name) }

func (s lockShape) attempt(owner string, ttl time.Duration, meta string) attempt {
	return attempt{owner: owner, token: owner, op: newOpID(), ttl: ttl, meta: meta}
}

func (s lockShape) acquireCall(a attempt) scriptCall {
	k := s.keys()
	return scriptCall{lockAcquire, []string{k.lock, k.fence}, []any{a.token, a.op, ms(a.ttl), a.meta, ms(s.l.c.fenceTTL)}}
}

func (s lockShape) holdID(a attempt) string { return s.keys().lock + "|" + a.token }

func (s lockShape) ops(a attempt) holdOps {
	return &keyOps{c: s.l.c, keys: s.keys(), holder: a.token, releaseScript: lockRelease, extendScript: lockExtend, owned: lockOwned, releaseOp: true}
}

// lockOwned reads a Lock key and reports whether holder owns it.
func lockOwned(ctx context.Context, c *Client, key, holder string) (bool, error) {
	o, err := c.rdb.HGet(ctx, key, "o").Result()
	if err != nil {
		if isNil(err) {
			return false, nil
		}
		return false, err
	}
	return o == holder, nil
}
