package dlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locker is one lock of any shape or backend.
type Locker interface {
	// Name returns the lock's name.
	Name() string
	// Acquire takes the lock (see Option for wait, lease and the rest). It
	// returns the Lease, or an error wrapping ErrNotAcquired when the wait
	// ran out, ctx.Err() when ctx was done first, or another sentinel error.
	Acquire(ctx context.Context, opts ...Option) (*Lease, error)
}

// redisShape is a lock shape kept in Redis by one acquire script.
type redisShape interface {
	kind() string
	lockName() string
	keys() lockKeys
	// attempt prepares one Acquire call by owner for a lease of ttl.
	attempt(owner string, ttl time.Duration, meta string) attempt
	// acquireCall is the script call that grants (or re-enters) the lock.
	acquireCall(a attempt) scriptCall
	// ops drives a granted attempt.
	ops(a attempt) holdOps
	// holdID identifies the grant among a Client's holds: a reentrant
	// shape returns the same id for the same owner.
	holdID(a attempt) string
}

// attempt is one Acquire call: ids that stay the same across its retries, so
// that a retry whose first reply was lost is recognised as ours.
type attempt struct {
	owner string // the lease context's owner
	token string // the holder id written to Redis (owner, or per-call token)
	op    string // operation id of this Acquire call
	ttl   time.Duration
	meta  string
}

// scriptCall is one invocation of a script.
type scriptCall struct {
	s    *redis.Script
	keys []string
	args []any
}

// run runs the call by EVALSHA, with EVAL on NOSCRIPT.
func (sc scriptCall) run(ctx context.Context, rdb redis.Scripter) *redis.Cmd {
	return sc.s.Run(ctx, rdb, sc.keys, sc.args...)
}

// queue adds the call to a pipeline by EVALSHA (or EVAL when eval is true).
func (sc scriptCall) queue(ctx context.Context, p redis.Pipeliner, eval bool) *redis.Cmd {
	if eval {
		return sc.s.Eval(ctx, p, sc.keys, sc.args...)
	}
	return sc.s.EvalSha(ctx, p, sc.keys, sc.args...)
}

// grant is the reply of an acquire script: {1, fence, ...} or {0, pttl}.
type grant struct {
	ok    bool
	fence int64
	pttl  time.Duration // the holder's remaining TTL when !ok; < 0: none
}

func parseGrant(v []int64) (grant, error) {
	if len(v) < 2 {
		return grant{}, fmt.Errorf("unexpected acquire reply %v", v)
	}
	if v[0] == 1 {
		return grant{ok: true, fence: v[1]}, nil
	}
	return grant{pttl: time.Duration(v[1]) * time.Millisecond}, nil
}

func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// acquire is the wait loop shared by every Redis shape: try; if held, wait
// for a release wake-up or for the holder's TTL to run out, and try again.
func (c *Client) acquire(ctx context.Context, sh redisShape, opts []Option) (l *Lease, err error) {
	start := time.Now()
	name := sh.lockName()
	defer func() {
		ev := AcquireEvent{Shape: sh.kind(), Name: name, Result: Acquired, Wait: time.Since(start)}
		switch {
		case err == nil:
		case isNotAcquired(err):
			ev.Result = NotAcquired
		default:
			ev.Result, ev.Err = AcquireErr, err
		}
		c.observer.ObserveAcquire(ev)
	}()
	if err := validName(name); err != nil {
		return nil, fmt.Errorf("dlock: acquire: %w", err)
	}
	cfg, err := newAcquireConfig(opts)
	if err != nil {
		return nil, fmt.Errorf("dlock: acquire %q: %w", name, err)
	}
	if c.isClosed() {
		return nil, fmt.Errorf("dlock: acquire %q: %w", name, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("dlock: acquire %q: %w", name, err)
	}
	ttl := cfg.lease
	if ttl == 0 {
		ttl = c.timeout
	}
	a := sh.attempt(ownerOf(ctx), ttl, c.holderMeta(start))
	var stop time.Time
	if cfg.wait >= 0 {
		stop = start.Add(cfg.wait)
	}
	var w *waiter
	defer func() {
		if w != nil {
			c.sub.leave(w, err == nil)
		}
	}()
	for {
		sent := time.Now()
		g, err := c.tryGrant(ctx, sh, a, cfg)
		if err != nil {
			return nil, err
		}
		if g.ok {
			return c.newLease(ctx, sh, a, g, sent, cfg)
		}
		now := time.Now()
		if cfg.wait == 0 || (!stop.IsZero() && !now.Before(stop)) {
			return nil, fmt.Errorf("dlock: acquire %q: %w", name, ErrNotAcquired)
		}
		if w == nil {
			w = c.sub.join(sh.keys().wake)
		}
		d := g.pttl
		if d <= 0 { // a key with no TTL: only a release or a resync wakes us
			d = c.timeout
		}
		if !stop.IsZero() && stop.Sub(now) < d {
			d = stop.Sub(now)
		}
		if err := w.wait(ctx, d); err != nil {
			return nil, fmt.Errorf("dlock: acquire %q: %w", name, err)
		}
	}
}

func isNotAcquired(err error) bool { return errors.Is(err, ErrNotAcquired) }

// tryGrant runs one acquire attempt.
func (c *Client) tryGrant(ctx context.Context, sh redisShape, a attempt, cfg acquireConfig) (grant, error) {
	if cfg.replicas != 0 {
		return c.grantReplicated(ctx, sh, a, cfg)
	}
	v, err := sh.acquireCall(a).run(ctx, c.rdb).Int64Slice()
	if err != nil {
		return grant{}, redisErr(ctx, "acquire", sh.lockName(), err)
	}
	g, err := parseGrant(v)
	if err != nil {
		return grant{}, fmt.Errorf("dlock: acquire %q: %w", sh.lockName(), err)
	}
	return g, nil
}

// newLease turns a grant into a Lease, joining the owner's existing hold on
// a reentrant lock.
func (c *Client) newLease(ctx context.Context, sh redisShape, a attempt, g grant, sent time.Time, cfg acquireConfig) (*Lease, error) {
	deadline := sent.Add(a.ttl - drift(a.ttl))
	id := sh.holdID(a)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		_, _ = sh.ops(a).release(context.WithoutCancel(ctx), newOpID())
		return nil, fmt.Errorf("dlock: acquire %q: %w", sh.lockName(), ErrClosed)
	}
	h := c.holds[id]
	var l *Lease
	if h != nil {
		l = newLease(ctx, h, a.owner, cfg.onLost)
		if h.attach(l) {
			c.mu.Unlock()
			h.raiseDeadline(deadline)
			return l, nil
		}
	}
	h = newHold(c, id, sh.kind(), sh.lockName(), sh.ops(a), g.fence, a.ttl, cfg.lease == 0, deadline)
	l = newLease(ctx, h, a.owner, cfg.onLost)
	h.start(l)
	c.holds[id] = h
	c.mu.Unlock()
	if h.watchdog {
		c.wd.add(h)
	}
	return l, nil
}

// forget removes an ended hold from the Client and its watchdog.
func (c *Client) forget(h *hold) {
	c.wd.remove(h)
	c.mu.Lock()
	if c.holds[h.id] == h {
		delete(c.holds, h.id)
	}
	c.mu.Unlock()
}
