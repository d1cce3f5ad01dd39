package dlock

import (
	"cmp"
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

// Optional hooks of a redisShape.
type (
	// validator checks a shape's own arguments (default: the name).
	validator interface{ validate() error }
	// trier is a shape whose attempt is more than one script call (a
	// MultiLock across Cluster slots, a RedLock over several Clients).
	trier interface {
		try(ctx context.Context, a attempt, cfg acquireConfig) (grant, error)
	}
	// queuer is a shape whose waiters keep a place in Redis while they wait
	// (attempt.queue > 0): they refresh it on every attempt, at least every
	// third of the queue timeout, and leaveCall removes it (and undoes a
	// grant made to this attempt that its caller never saw) when Acquire
	// returns without a lease.
	queuer interface{ leaveCall(a attempt) scriptCall }
	// localWaker is a shape whose waiters are woken only by releases made
	// through the same Client (no subscription: across processes they
	// would all wake for every release).
	localWaker interface{ wakesLocally() }
)

// attempt is one Acquire call: ids that stay the same across its retries, so
// that a retry whose first reply was lost is recognised as ours.
type attempt struct {
	owner  string   // the lease context's owner
	token  string   // the holder id written to Redis (owner, or per-call token)
	tokens []string // several holder ids granted at once (Semaphore permits), one Lease each
	op     string   // operation id of this Acquire call
	ttl    time.Duration
	meta   string
	queue  time.Duration // a queuer's place timeout; 0: try without queueing (Wait(0))
	queued bool          // an earlier attempt of this call queued it
}

// each returns the attempt once per grant it asks for (several for a
// multi-permit acquisition).
func (a attempt) each() []attempt {
	if len(a.tokens) == 0 {
		return []attempt{a}
	}
	out := make([]attempt, len(a.tokens))
	for i, tok := range a.tokens {
		out[i] = a
		out[i].token, out[i].tokens = tok, nil
	}
	return out
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

// grant is the reply of an acquire script: {1, fence, ...} granted, or
// {0, pttl[, pass]} refused, where pass = 1 means a wake-up this attempt
// could not use may serve another waiter.
type grant struct {
	ok     bool
	fence  int64
	fences []int64       // one per attempt.tokens
	ttl    time.Duration // the grant's TTL if not the attempt's lease (a hand-off)
	pttl   time.Duration // the holder's remaining TTL when !ok; < 0: none
	pass   bool          // refused, but pass the wake-up on
	wake   string        // channel to wait on when !ok; "": wait on the timer only
	detail string        // why not, added to ErrNotAcquired
	reply  []int64
}

func parseGrant(v []int64) (grant, error) {
	if len(v) < 2 {
		return grant{}, fmt.Errorf("unexpected acquire reply %v", v)
	}
	if v[0] == 1 {
		return grant{ok: true, fence: v[1], reply: v}, nil
	}
	return grant{pttl: time.Duration(v[1]) * time.Millisecond, reply: v}, nil
}

func ms(d time.Duration) int64 { return int64((d + time.Millisecond - 1) / time.Millisecond) }

// acquire is the wait loop shared by every Redis shape: try; if held, wait
// for a release wake-up or for the holder's TTL to run out, and try again.
func (c *Client) acquire(ctx context.Context, sh redisShape, opts []Option) (*Lease, error) {
	ls, err := c.acquireAll(ctx, sh, opts)
	if err != nil {
		return nil, err
	}
	return ls[0], nil
}

// acquireAll is acquire for an attempt that may grant several leases at once.
func (c *Client) acquireAll(ctx context.Context, sh redisShape, opts []Option) (ls []*Lease, err error) {
	start := time.Now()
	name := sh.lockName()
	defer func() { c.keeper.Acquired(sh.kind(), name, start, err) }()
	if v, ok := sh.(validator); ok {
		err = v.validate()
	} else {
		err = validName(name)
	}
	if err != nil {
		return nil, wrap("acquire", name, err)
	}
	cfg, err := newAcquireConfig(opts)
	if err != nil {
		return nil, wrap("acquire", name, err)
	}
	if c.isClosed() {
		return nil, wrap("acquire", name, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrap("acquire", name, err)
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
	_, addressed := sh.(handOffer)
	var w *waiter
	defer func() {
		if w != nil {
			// a waiter that got no lock passes a shared wake-up on
			c.sub.leave(w, err == nil || addressed)
		}
	}()
	if q, ok := sh.(queuer); ok {
		if cfg.wait != 0 {
			a.queue = cmp.Or(cfg.queue, DefaultQueueTimeout)
		}
		defer func() {
			// A clean refusal of Wait(0) queued nothing and was granted nothing.
			if err != nil && (a.queue > 0 || !isNotAcquired(err)) {
				c.leaveQueue(ctx, sh, q.leaveCall(a), a.queue)
			}
		}()
	}
	var first time.Time // when the first attempt was sent
	for {
		sent := time.Now()
		if first.IsZero() {
			first = sent
		}
		g, err := c.tryGrant(ctx, sh, a, cfg)
		if err != nil {
			return nil, err
		}
		if g.ok {
			return c.newLeases(ctx, sh, a, g, sent, cfg)
		}
		a.queued = a.queue > 0
		now := time.Now()
		if cfg.wait == 0 || (!stop.IsZero() && !now.Before(stop)) {
			if g.detail != "" {
				return nil, wrap("acquire", name, fmt.Errorf("%w (%s)", ErrNotAcquired, g.detail))
			}
			return nil, wrap("acquire", name, ErrNotAcquired)
		}
		if w != nil && w.channel != g.wake {
			c.sub.leave(w, false)
			w = nil
		}
		if w == nil && g.wake != "" {
			// Joined after the refusal: a hand-off published in between is
			// kept for it (see subscriber.join).
			w = c.sub.join(g.wake, a.op)
		}
		if w != nil {
			if _, local := sh.(localWaker); !local {
				c.sub.listen(w)
			}
			if g.pass {
				c.sub.pass(w)
			}
		}
		// PTTL is truncated to whole ms (0: under 1 ms left), so wait 1 ms
		// more; a key with no TTL (-1) is woken by a release or a resync.
		d := g.pttl + time.Millisecond
		if g.pttl < 0 {
			d = c.timeout
		}
		if a.queue > 0 {
			d = min(d, a.queue/3)
		}
		if !stop.IsZero() && stop.Sub(now) < d {
			d = stop.Sub(now)
		}
		if err := w.wait(ctx, d); err != nil {
			return nil, wrap("acquire", name, err)
		}
		// Handed the lock by a release: it is ours from a moment after the
		// first attempt was sent, for the hand-off's TTL. With too little of
		// that left on our clock, the next attempt claims it instead.
		if h, ok := c.sub.handed(w); ok && usableHandoff(first, h.ttl) {
			return c.newLeases(ctx, sh, a, grant{ok: true, fence: h.fence, ttl: h.ttl}, first, cfg)
		}
	}
}

func isNotAcquired(err error) bool { return errors.Is(err, ErrNotAcquired) }

// leaveQueue runs a queuer's leave call after Acquire failed, also when ctx
// is done: a place left behind would block the queue until its timeout (and
// a grant handed to it until that grant's TTL). If Redis cannot be reached
// (the usual reason an Acquire fails with an error), the call is retried in
// the background until it succeeds, the place would have timed out anyway
// (queue > 0: its queue timeout), or the Client is closed.
func (c *Client) leaveQueue(ctx context.Context, sh redisShape, call scriptCall, queue time.Duration) {
	leave := func(ctx context.Context) error {
		lctx, cancel := context.WithTimeout(ctx, unlockTimeout)
		defer cancel()
		return call.run(lctx, c.rdb).Err()
	}
	err := leave(context.WithoutCancel(ctx))
	if err == nil || queue <= 0 {
		return
	}
	if c.logger != nil {
		c.logger.Debug("dlock: leaving the queue failed; retrying", "shape", sh.kind(), "name", sh.lockName(), "err", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.retries.Add(1)
	go func() {
		defer c.retries.Done()
		rctx, cancel := context.WithTimeout(c.bg, queue)
		defer cancel()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				if leave(rctx) == nil {
					return
				}
			}
		}
	}()
}

// tryGrant runs one acquire attempt.
func (c *Client) tryGrant(ctx context.Context, sh redisShape, a attempt, cfg acquireConfig) (grant, error) {
	if t, ok := sh.(trier); ok {
		return t.try(ctx, a, cfg)
	}
	var g grant
	if cfg.replicas != 0 {
		var err error
		if g, err = c.grantReplicated(ctx, sh, a, cfg); err != nil {
			return grant{}, err
		}
	} else {
		v, err := sh.acquireCall(a).run(ctx, c.rdb).Int64Slice()
		if err != nil {
			return grant{}, redisErr(ctx, "acquire", sh.lockName(), err)
		}
		if g, err = parseGrant(v); err != nil {
			return grant{}, wrap("acquire", sh.lockName(), err)
		}
	}
	g.wake = sh.keys().wake
	switch {
	case g.ok && len(a.tokens) > 0:
		if len(g.reply) != len(a.tokens)+1 {
			return grant{}, fmt.Errorf("dlock: acquire %q: unexpected acquire reply %v", sh.lockName(), g.reply)
		}
		g.fences = g.reply[1:]
	case !g.ok:
		g.pass = len(g.reply) > 2 && g.reply[2] == 1
	}
	return g, nil
}

// newLeases turns a grant into its Leases: one, or one per attempt.tokens.
func (c *Client) newLeases(ctx context.Context, sh redisShape, a attempt, g grant, sent time.Time, cfg acquireConfig) ([]*Lease, error) {
	if len(a.tokens) == 0 {
		l, err := c.keeper.Lease(ctx, c.grantOf(sh, a, g.fence, g.ttl, sent, cfg))
		if err != nil {
			return nil, err
		}
		return []*Lease{l}, nil
	}
	ls := make([]*Lease, 0, len(a.tokens))
	var err error
	for i, one := range a.each() {
		gr := c.grantOf(sh, one, g.fences[i], 0, sent, cfg)
		if err != nil { // cancelled or closed meanwhile: give the rest back
			c.keeper.giveBack(ctx, gr)
			continue
		}
		var l *Lease
		if l, err = c.keeper.Lease(ctx, gr); err == nil {
			ls = append(ls, l)
		}
	}
	if err != nil {
		for _, l := range ls {
			_ = l.Unlock(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	return ls, nil
}

// grantOf describes a Redis grant for the Keeper; ttl is the grant's TTL
// when it is shorter than the lease asked for (a hand-off), else 0.
func (c *Client) grantOf(sh redisShape, a attempt, fence int64, ttl time.Duration, sent time.Time, cfg acquireConfig) Grant {
	return Grant{
		Shape: sh.kind(), Name: sh.lockName(), Key: sh.holdID(a), Owner: a.owner, ID: a.token,
		Token: fence, Sent: sent, TTL: cmp.Or(ttl, a.ttl), Lease: a.ttl, Renewed: cfg.lease == 0,
		Ops: redisOps{sh.ops(a)}, OnLost: cfg.onLost,
	}
}
