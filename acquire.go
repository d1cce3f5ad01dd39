package dlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

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
	spec := sh.spec()
	name := spec.name
	defer func() { c.keeper.Acquired(spec.kind, name, start, err) }()
	if spec.check != nil {
		err = spec.check()
	} else {
		err = validName(name)
	}
	if err != nil {
		return nil, wrap("acquire", name, err)
	}
	cfg, err := newAcquireConfig(opts)
	if err == nil && cfg.replicas != 0 && !spec.replicaAck {
		err = fmt.Errorf("%w: ReplicaAck is not supported by %s", ErrInvalidArgument, spec.kind)
	}
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
	addressed := spec.wake == wakeHandOff
	var w *waiter
	defer func() {
		if w != nil {
			// a waiter that got no lock passes a shared wake-up on
			c.sub.leave(w, err == nil || addressed)
		}
	}()
	if spec.leave != nil {
		if cfg.wait != 0 {
			a.queue = cmp.Or(cfg.queue, DefaultQueueTimeout)
		}
		defer func() {
			// A clean refusal of Wait(0) queued nothing and was granted nothing.
			if err != nil && (a.queue > 0 || !isNotAcquired(err)) {
				c.leaveQueue(ctx, spec, spec.leave(a), a.queue)
			}
		}()
	}
	var first time.Time // when the first attempt was sent
	for {
		sent := time.Now()
		if first.IsZero() {
			first = sent
		}
		g, err := c.tryGrant(ctx, sh, spec, a, cfg)
		if err != nil {
			return nil, err
		}
		if g.ok && c.late(ctx, sh, spec, a, g, sent, cfg) {
			// Given back: taken as a refusal, tried again within the wait.
			g = grant{wake: spec.keys.wake, detail: "grants arrive after their lease ran out: replies are slower than the lease"}
		}
		if g.ok {
			return c.newLeases(ctx, sh, spec, a, g, sent, cfg)
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
			if spec.wake != wakeLocal {
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
			return c.newLeases(ctx, sh, spec, a, grant{ok: true, fence: h.fence, ttl: h.ttl}, first, cfg)
		}
	}
}

// leaveQueue runs a queuer's leave call after Acquire failed, also when ctx
// is done: a place left behind would block the queue until its timeout (and
// a grant handed to it until that grant's TTL). If Redis cannot be reached
// (the usual reason an Acquire fails with an error), the call is retried in
// the background until it succeeds, the place would have timed out anyway
// (queue > 0: its queue timeout), or the Client is closed.
func (c *Client) leaveQueue(ctx context.Context, spec shapeSpec, call scriptCall, queue time.Duration) {
	leave := func(ctx context.Context) error {
		lctx, cancel := context.WithTimeout(ctx, unlockTimeout)
		defer cancel()
		return call.run(lctx, c.rdb).Err()
	}
	if ctx.Err() == nil { // the caller may wait for it
		err := leave(context.WithoutCancel(ctx))
		if err == nil || queue <= 0 {
			return
		}
		if c.logger != nil {
			c.logger.Debug("dlock: leaving the queue failed; retrying", "shape", spec.kind, "name", spec.name, "err", err)
		}
	}
	// A caller whose ctx was cancelled waits for the leave only a moment
	// (long enough for a server that answers); one whose deadline passed
	// does not wait at all: Acquire returns by its deadline.
	left := make(chan struct{})
	c.background(func() {
		defer close(left)
		rctx, cancel := context.WithTimeout(c.bg, max(queue, unlockTimeout))
		defer cancel()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for leave(rctx) != nil {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
			}
		}
	})
	if errors.Is(ctx.Err(), context.Canceled) {
		select {
		case <-left:
		case <-time.After(leaveGrace):
		}
	}
}

// leaveGrace is how long an Acquire whose ctx was cancelled waits for its
// place in the queue to be left before it returns (the leave goes on
// without it).
const leaveGrace = 200 * time.Millisecond

// background runs f in a goroutine that Close waits for; after Close it
// runs nothing.
func (c *Client) background(f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	c.retries.Add(1)
	go func() {
		defer c.retries.Done()
		f()
	}()
}

// tryGrant runs one acquire attempt and returns by ctx's end even when Redis
// does not answer: go-redis waits for its ReadTimeout on a silent server
// unless the client has ContextTimeoutEnabled, so without it the attempt
// runs in a goroutine and Acquire returns ctx's error when ctx ends first.
// What the abandoned attempt then receives is given back in the background
// (a grant is released; a queue place is left by Acquire's own leave).
func (c *Client) tryGrant(ctx context.Context, sh redisShape, spec shapeSpec, a attempt, cfg acquireConfig) (grant, error) {
	if c.ctxReads || ctx.Done() == nil {
		return c.tryOnce(ctx, sh, spec, a, cfg)
	}
	type result struct {
		g   grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := c.tryOnce(ctx, sh, spec, a, cfg)
		done <- result{g, err}
	}()
	select {
	case r := <-done:
		return r.g, r.err
	case <-ctx.Done():
	}
	c.background(func() {
		if r := <-done; r.err == nil && r.g.ok {
			c.giveBack(context.Background(), sh, spec, a, r.g, cfg)
		}
	})
	return grant{}, wrap("acquire", spec.name, ctx.Err())
}

// tryOnce runs one acquire attempt: the shape's own try, or its acquire
// script once (with WAIT on the same connection when ReplicaAck asks).
func (c *Client) tryOnce(ctx context.Context, sh redisShape, spec shapeSpec, a attempt, cfg acquireConfig) (grant, error) {
	var g grant
	var err error
	switch {
	case spec.try != nil:
		g, err = spec.try(ctx, a)
	case cfg.replicas != 0:
		g, err = c.grantReplicated(ctx, sh, spec, a, cfg)
	default:
		var v []int64
		if v, err = sh.acquireCall(a).run(ctx, c.rdb).Int64Slice(); err != nil {
			return grant{}, redisErr(ctx, "acquire", spec.name, err)
		}
		if g, err = parseGrant(v); err != nil {
			err = wrap("acquire", spec.name, err)
		}
	}
	if err != nil {
		return grant{}, err
	}
	switch {
	case g.ok && len(a.tokens) > 0:
		if len(g.reply) != len(a.tokens)+1 {
			return grant{}, wrap("acquire", spec.name, fmt.Errorf("unexpected acquire reply %v", g.reply))
		}
		g.fences = g.reply[1:]
	case !g.ok:
		g.pass = len(g.reply) > 2 && g.reply[2] == 1
		switch {
		case g.wake != "": // the shape's try chose
		case spec.refusedOn != nil:
			g.wake = spec.refusedOn(g.reply)
		default:
			g.wake = spec.keys.wake
		}
	}
	return g, nil
}

// late gives g back and reports true if it arrived after its lease ran out
// on the client's clock (counted from sent): the store may already have
// expired it and granted the lock to someone else, so it is never used.
func (c *Client) late(ctx context.Context, sh redisShape, spec shapeSpec, a attempt, g grant, sent time.Time, cfg acquireConfig) bool {
	ttl := cmp.Or(g.ttl, a.ttl)
	if time.Now().Before(sent.Add(ttl - Drift(ttl))) {
		return false
	}
	c.giveBack(ctx, sh, spec, a, g, cfg)
	return true
}

// giveBack releases every grant of g (one, or one per attempt.tokens): a
// grant nobody will hold.
func (c *Client) giveBack(ctx context.Context, sh redisShape, spec shapeSpec, a attempt, g grant, cfg acquireConfig) {
	for i, one := range a.each() {
		fence := g.fence
		if len(g.fences) > i {
			fence = g.fences[i]
		}
		c.keeper.giveBack(ctx, c.grantOf(sh, spec, one, fence, 0, time.Time{}, cfg))
	}
}

// newLeases turns a grant into its Leases: one, or one per attempt.tokens.
func (c *Client) newLeases(ctx context.Context, sh redisShape, spec shapeSpec, a attempt, g grant, sent time.Time, cfg acquireConfig) ([]*Lease, error) {
	if len(a.tokens) == 0 {
		l, err := c.keeper.Lease(ctx, c.grantOf(sh, spec, a, g.fence, g.ttl, sent, cfg))
		if err != nil {
			return nil, err
		}
		return []*Lease{l}, nil
	}
	ls := make([]*Lease, 0, len(a.tokens))
	var err error
	for i, one := range a.each() {
		gr := c.grantOf(sh, spec, one, g.fences[i], 0, sent, cfg)
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
func (c *Client) grantOf(sh redisShape, spec shapeSpec, a attempt, fence int64, ttl time.Duration, sent time.Time, cfg acquireConfig) Grant {
	return Grant{
		Shape: spec.kind, Name: spec.name, Key: sh.holdID(a), Owner: a.owner, ID: a.token,
		Token: fence, Sent: sent, TTL: cmp.Or(ttl, a.ttl), Lease: a.ttl, Renewed: cfg.lease == 0,
		Ops: redisOps{sh.ops(a)}, OnLost: cfg.onLost,
	}
}
