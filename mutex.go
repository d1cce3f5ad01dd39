package dlock

import (
	"context"
	"strings"
	"time"
)

// Mutex is the minimal correct lock (one string key, SET NX PX, a random
// token per acquisition, compare-and-delete release). It is not reentrant:
// acquiring a Mutex that the same owner already holds waits like anyone
// else (and, with no Wait, until ctx is done). Use Lock for reentrancy.
type Mutex struct {
	c    *Client
	name string
}

// Mutex returns the Mutex called name. The name is checked by Acquire.
func (c *Client) Mutex(name string) *Mutex { return &Mutex{c: c, name: name} }

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Acquire takes the mutex; see Locker.
func (m *Mutex) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return m.c.acquire(ctx, mutexShape{m}, opts)
}

type mutexShape struct{ m *Mutex }

func (s mutexShape) kind() string     { return "mutex" }
func (s mutexShape) lockName() string { return s.m.name }
func (s mutexShape) keys() lockKeys   { return s.m.c.keys(s.m.name) }

func (s mutexShape) attempt(owner string, ttl time.Duration, meta string) attempt {
	return attempt{owner: owner, token: newToken(), op: newOpID(), ttl: ttl, meta: meta}
}

func (s mutexShape) acquireCall(a attempt) scriptCall {
	k := s.keys()
	return scriptCall{mutexAcquire, []string{k.lock, k.fence}, []any{a.token, ms(a.ttl), a.meta, ms(s.m.c.fenceTTL)}}
}

func (s mutexShape) holdID(a attempt) string { return s.keys().lock + "|" + a.token }

func (s mutexShape) ops(a attempt) holdOps {
	return &keyOps{c: s.m.c, keys: s.keys(), holder: a.token, releaseScript: mutexRelease, extendScript: mutexExtend, owned: mutexOwned}
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
