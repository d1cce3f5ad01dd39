package dlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockgo/dlock/seam"
)

// acquire is Acquire of every Redis shape: its call is a seam.Line (try;
// if held, wait for a release wake-up or for the holder's TTL to run out,
// and try again) under seam.Queue, the loop of every backend.
//
// The store calls run under call.Store (seam's Begin), which carries the
// Observer's span when it is an observe.Tracer; the Lease's context derives
// from ctx.
func (c *Client) acquire(ctx context.Context, sh redisShape, opts []Option) (l *Lease, err error) {
	q, call, err := c.begin(ctx, sh, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = call.End(l.s(), err) }()
	defer c.acquires.Done()
	return leaseOf(seam.Queue(call.Store, &call, seam.Line[*acquisition](q), c.isClosed, "redis"))
}

// leaseOf is a lease the Keeper made, as the user holds it.
func leaseOf(l *seam.Lease, err error) (*Lease, error) { return (*Lease)(l), err }

// acquireAll is acquire for an attempt that may grant several leases at
// once (Semaphore permits): one Lease per token.
func (c *Client) acquireAll(ctx context.Context, sh redisShape, opts []Option) (ls []*Lease, err error) {
	q, call, err := c.begin(ctx, sh, opts)
	if err != nil {
		return nil, err
	}
	defer func() {
		var first *Lease
		if len(ls) > 0 {
			first = ls[0]
		}
		err = call.End(first.s(), err)
	}()
	defer c.acquires.Done()
	l, err := seam.Queue(call.Store, &call, seam.Line[*acquisition](q), c.isClosed, "redis")
	switch {
	case err != nil:
		return nil, err
	case q.leases == nil:
		return []*Lease{(*Lease)(l)}, nil
	}
	return q.leases, nil
}

// acquisition is one Acquire call: its shape, attempt and options, and the
// seam.Line of its place in the lock's line (the call is its own place:
// Look makes its attempts).
type acquisition struct {
	c    *Client
	sh   redisShape
	spec *shapeSpec
	a    *attempt
	cfg  seam.Options
	ctx  context.Context // the caller's: a Lease derives from it
	// store is call.Store, under which the calls made for the call after
	// it gave up (its leave) run.
	store context.Context
	stop  time.Time // when the Wait runs out (zero: never)
	// g is the last attempt's outcome, or the grant a hand-off brought;
	// sent is when the request granted was sent (a hand-off's: first's,
	// a safe lower bound); first is when the first attempt was.
	g           grant
	sent, first time.Time
	lateGrants  int      // grants in a row that came after their lease ran out
	w           *waiter  // its wake channel, once joined
	err         error    // what ended the call, for Leave
	leases      []*Lease // a grant of several permits: one Lease each
	// flying is closed once the reply of an attempt that Acquire gave up
	// on while it was in flight is in; reply then returns it.
	flying <-chan struct{}
	reply  func() grant
	// unsure: the last attempt's call was cut by ctx's deadline, so a
	// grant it made may never have been read; Acquire gives it back.
	unsure bool
	// carried: the attempt acquires for the owner ctx carries (a re-entry,
	// maybe), not for an owner of its own.
	carried bool
}

// begin begins an Acquire call of sh (seam's Begin) and makes its
// attempt; on success the caller ends the call and calls c.acquires.Done.
func (c *Client) begin(ctx context.Context, sh redisShape, opts []Option) (*acquisition, seam.Acquisition, error) {
	spec := sh.spec()
	call, err := c.keeper.Begin(ctx, seam.Request{Shape: spec.kind, Name: spec.name, Check: spec.check, Limit: spec.limit()}, opts)
	if err != nil {
		return nil, call, err
	}
	if !c.enter() {
		return nil, call, call.End(nil, ErrClosed)
	}
	cfg := call.Options
	ttl := cfg.Lease
	if ttl == 0 {
		ttl = c.timeout
	}
	owner := seam.CarriedOwner(ctx)
	a := spec.newAttempt(&c.conn, owner, ttl, call.Start)
	if spec.leave != nil && cfg.Wait != 0 {
		a.setQueue(cmp.Or(cfg.QueueTimeout, defaultQueueTimeout))
	}
	q := &acquisition{c: c, sh: sh, spec: spec, a: a, cfg: cfg, ctx: ctx, store: call.Store, carried: owner != ""}
	if cfg.Wait >= 0 {
		q.stop = call.Start.Add(cfg.Wait)
	}
	return q, call, nil
}

// Join: the call is its own place; Look makes its attempts.
func (q *acquisition) Join(context.Context) (*acquisition, bool, error) { return q, true, nil }

// Look makes an attempt (or finds the grant a hand-off brought): Granted,
// or Behind, where its wake channel says; a refusal for good (a try, or the
// Wait over: ErrNotAcquired with the refusal's detail) and the attempt's
// error are its error. A grant that came after its lease ran out is given
// back and taken as a refusal.
func (q *acquisition) Look(ctx context.Context, _ *acquisition) (seam.Stand, error) {
	if q.g.ok {
		return seam.Granted, nil
	}
	spec, a := q.spec, q.a
	q.sent = time.Now()
	if q.first.IsZero() {
		q.first = q.sent
	} else {
		a.retry(q.sent) // a fence from this try's clock
	}
	g, err := q.tryGrant(ctx)
	if err != nil {
		if q.lateGrants > 0 && isCtxErr(err) {
			err = fmt.Errorf("%w (%s)", err, seam.LateDetail(q.lateGrants))
		}
		return seam.Behind, q.end(err)
	}
	switch {
	case g.ok && q.late(ctx, g, q.sent):
		// Given back: taken as a refusal, tried again within the wait.
		q.lateGrants++
		g = grant{wake: spec.keys.wake, detail: seam.LateDetail(q.lateGrants)}
	case !g.ok:
		q.lateGrants = 0
	}
	q.g = g
	if g.ok {
		return seam.Granted, nil
	}
	a.queued = a.queue > 0
	if q.cfg.Wait == 0 || (!q.stop.IsZero() && !time.Now().Before(q.stop)) {
		err := ErrNotAcquired
		if g.detail != "" {
			err = fmt.Errorf("%w (%s)", ErrNotAcquired, g.detail)
		}
		return seam.Behind, q.end(wrap("acquire", spec.kind, spec.name, err))
	}
	return seam.Behind, nil
}

// Wait waits on the refusal's wake channel for a release, a hand-off (the
// next Look finds it Granted) or the holder's TTL, within the wait, ctx and
// Close.
func (q *acquisition) Wait(ctx context.Context, _ *acquisition) (bool, error) {
	c, spec, g := q.c, q.spec, q.g
	if q.w != nil && q.w.channel != g.wake {
		c.sub.leave(q.w, false)
		q.w = nil
	}
	if q.w == nil && g.wake != "" {
		// Joined after the refusal: a hand-off published in between is
		// kept for it (see subscriber.join).
		q.w = c.sub.join(g.wake, q.a.op, spec.wake != wakeLocal)
	}
	if q.w != nil && g.pass {
		c.sub.pass(q.w)
	}
	// PTTL is truncated to whole ms (0: under 1 ms left), so wait 1 ms
	// more; a key with no TTL (-1) is woken by a release or a resync.
	d := g.pttl + time.Millisecond
	if g.pttl < 0 {
		d = c.timeout
	}
	if q.a.queue > 0 {
		d = min(d, q.a.queue/3)
	}
	now := time.Now()
	if !q.stop.IsZero() && q.stop.Sub(now) < d {
		d = q.stop.Sub(now)
	}
	err := q.w.wait(ctx, c.bg.Done(), d)
	if err == nil && c.bg.Err() != nil { // woken by Close
		err = ErrClosed
	}
	if err != nil {
		if q.lateGrants > 0 {
			err = fmt.Errorf("%w (%s)", err, seam.LateDetail(q.lateGrants))
		}
		return false, q.end(wrap("acquire", spec.kind, spec.name, err))
	}
	// Handed the lock by a release: it is ours from a moment after the
	// first attempt was sent, for the hand-off's TTL. With too little of
	// that left on our clock, the next attempt claims it instead.
	if h, ok := c.sub.handed(q.w, func(h handoff) bool { return usableHandoff(q.first, h.ttl) }); ok {
		q.w = nil // it left its channel
		q.g, q.sent = grant{ok: true, fence: h.fence, ttl: h.ttl}, q.first
	}
	return false, nil
}

// Grant turns the grant into the call's Lease (several permits of a
// Semaphore: one Lease each, in q.leases, the first returned).
func (q *acquisition) Grant(context.Context, *acquisition) (*seam.Lease, error) {
	c, g := q.c, q.g
	if q.w != nil { // a shared wake-up is not passed on: the call got its lock
		c.sub.leave(q.w, true)
		q.w = nil
	}
	if len(q.a.tokens) == 0 {
		return c.keeper.Lease(q.ctx, q.grantOf(q.a, g.fence, g.ttl, q.sent))
	}
	var err error
	ls := make([]*Lease, 0, len(q.a.tokens))
	for i, one := range q.a.each() {
		gr := q.grantOf(one, g.fences[i], 0, q.sent)
		if err != nil { // cancelled or closed meanwhile: give the rest back
			c.keeper.GiveBack(q.ctx, gr)
			continue
		}
		var l *Lease
		if l, err = leaseOf(c.keeper.Lease(q.ctx, gr)); err == nil {
			ls = append(ls, l)
		}
	}
	if err != nil {
		for _, l := range ls {
			_ = l.Unlock(context.WithoutCancel(q.ctx))
		}
		return nil, err
	}
	q.leases = ls
	return ls[0].s(), nil
}

// end records err, which ends the call, for Leave.
func (q *acquisition) end(err error) error {
	q.err = err
	return err
}

// Leave undoes what the call's attempts left in Redis: a waiter that got
// no lock passes a shared wake-up on; an attempt still in flight is undone
// once its reply is in, never before (a leave that ran first would let the
// late attempt queue again, or keep a grant nobody holds); a shape with a
// queue leaves it (which also gives back a grant whose reply was lost; a
// clean refusal of Wait(0) queued nothing and was granted nothing); a
// grant an attempt cut by the deadline may have made is given back.
func (q *acquisition) Leave(*acquisition) {
	c, spec, a := q.c, q.spec, q.a
	if q.w != nil {
		c.sub.leave(q.w, spec.wake == wakeHandOff)
		q.w = nil
	}
	switch {
	case q.flying != nil:
		q.undoLate(q.store)
	case spec.leave != nil && (a.queue > 0 || !isNotAcquired(q.err)):
		c.leaveQueue(q.store, spec, spec.leave(a), a.queue)
	case q.unsure:
		q.giveBackUnsure()
	}
}

// Transient: a Redis error ends the call (a Cluster's passing states are
// refusals, tried again within the wait: see failed).
func (q *acquisition) Transient(error) bool { return false }

func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// leaveQueue runs a queuer's leave call after Acquire failed, also when ctx
// is done: a place left behind would block the queue until its timeout (and
// a grant handed to it until that grant's TTL). If Redis cannot be reached
// (the usual reason an Acquire fails with an error), the call is retried in
// the background until it succeeds, the place would have timed out anyway
// (queue > 0: its queue timeout), or the Client is closed.
func (c *Client) leaveQueue(ctx context.Context, spec *shapeSpec, call scriptCall, queue time.Duration) {
	leave := func(ctx context.Context) error {
		lctx, cancel := context.WithTimeout(ctx, unlockTimeout)
		defer cancel()
		lctx, stop := c.closing(lctx) // a waiter ended by Close leaves within Close's bound
		defer stop()
		return c.scripts.run(lctx, call).Err()
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

// tryGrant runs one acquire attempt and returns by ctx's deadline even when
// Redis does not answer. A shape's one script call goes through the
// Client's batcher (pipelined with the calls of other callers); it runs on
// the caller's goroutine when nothing else is in flight and the call ends
// by ctx's deadline anyway (see inline). A shape that makes several calls
// per attempt (spec.try, ReplicaAck) runs on the caller's goroutine in the
// same case, else on one of the Client's worker goroutines while the
// caller watches ctx. When ctx ends first, an attempt already sent is left
// in q.flying: Acquire undoes what it did once its reply is in (undoLate);
// an attempt whose call ctx's deadline cut is marked q.unsure.
func (q *acquisition) tryGrant(ctx context.Context) (grant, error) {
	c, spec := q.c, q.spec
	if spec.try != nil || q.cfg.Replicas != 0 {
		return q.tryBeside(ctx)
	}
	cmd, flying, err := c.calls.do(ctx, q.sh.acquireCall(q.a), q.inline(ctx), true)
	if err != nil {
		if flying != nil {
			q.flying = flying.done
			q.reply = func() grant { g, _ := readGrant(flying.cmd); return g }
		}
		return grant{}, wrap("acquire", spec.kind, spec.name, err)
	}
	g, err := readGrant(cmd)
	if err != nil {
		q.unsure = ctx.Err() != nil && q.undoable()
		return q.failed(ctx, err)
	}
	return q.read(g)
}

// tryBeside is tryGrant for the shapes that make several calls per attempt.
func (q *acquisition) tryBeside(ctx context.Context) (grant, error) {
	c := q.c
	if c.ends(ctx) || (q.spec.try == nil && q.inline(ctx)) {
		// A RedLock's try calls other clients: only the first case is
		// known to end by the deadline.
		g, err := q.tryOnce(ctx)
		q.unsure = err != nil && ctx.Err() != nil && q.undoable()
		return g, err
	}
	type result struct {
		g   grant
		err error
	}
	done := make(chan result, 1)
	flying := make(chan struct{})
	var late grant
	c.runBeside(func() {
		g, err := q.tryOnce(ctx) // reads only what stays the same for the call
		if err == nil {
			late = g
		}
		done <- result{g, err}
		close(flying)
	})
	select {
	case r := <-done:
		return r.g, r.err
	case <-ctx.Done():
	}
	q.flying, q.reply = flying, func() grant { return late }
	return grant{}, wrap("acquire", q.spec.kind, q.spec.name, ctx.Err())
}

// inline reports whether the attempt's call under ctx may run on the
// caller's goroutine: it returns by ctx's deadline, through the Client's
// deadlined copy of the go-redis client or because rdb's own bound is
// sooner, and a grant whose reply the deadline cuts off can be given back
// without knowing it was made. That holds for a shape that leaves its
// queue (the leave gives back such a grant), for a holder id of this call
// alone (a release of what was not granted changes nothing); not for a
// re-entry of an owner that may hold the lock already (a give-back would
// end one of its holds): that attempt runs on a worker, whose reply is
// always read.
func (q *acquisition) inline(ctx context.Context) bool {
	c := q.c
	if ctx.Done() == nil {
		return true
	}
	_, deadline := ctx.Deadline()
	if !c.bounded && !(deadline && c.scripts.deadlined != nil) {
		return c.ends(ctx)
	}
	return q.undoable()
}

// undoable reports whether a grant the attempt may have made can be given
// back unseen (see inline).
func (q *acquisition) undoable() bool {
	return q.spec.leave != nil || !q.spec.owned || !q.carried
}

// ends reports whether a call under ctx through the user's go-redis client
// returns by ctx's deadline: it has none, or rdb bounds the call by it
// (ContextTimeoutEnabled) or ends it sooner by its own timeouts.
func (c *Client) ends(ctx context.Context) bool {
	if c.bounded || ctx.Done() == nil {
		return true
	}
	d, ok := ctx.Deadline()
	return !ok || (c.hung > 0 && time.Until(d) > c.hung)
}

// giveBackUnsure gives back, in the background, a grant that the attempt
// whose call ctx's deadline cut may have made (see inline): a release by
// the attempt's own holder ids, which changes nothing where none was made.
func (q *acquisition) giveBackUnsure() {
	q.c.background(func() {
		q.giveBack(context.Background(), grant{ok: true})
	})
}

// undoLate undoes, in the background, what the attempt still in flight
// when Acquire gave up did, once its reply is in: a shape with a queue
// leaves it (which also gives back a grant made to the attempt), any other
// gives back a grant.
func (q *acquisition) undoLate(ctx context.Context) {
	c, spec, a := q.c, q.spec, q.a
	flying, reply := q.flying, q.reply
	c.background(func() {
		<-flying
		if spec.leave != nil {
			c.leaveQueue(context.WithoutCancel(ctx), spec, spec.leave(a), a.queue)
			return
		}
		if g := reply(); g.ok {
			q.giveBack(context.Background(), g)
		}
	})
}

// runBeside runs f on a worker goroutine of the Client (reused: the
// attempts that must not block their caller run on stacks that have grown
// already), or on the caller's once the Client is closed. Close waits for
// the workers.
func (c *Client) runBeside(f func()) {
	if !c.workers.Go(f) {
		f()
	}
}

// tryOnce runs one attempt of a shape that makes several calls: its own
// try, or its acquire script with WAIT on the same connection (ReplicaAck).
func (q *acquisition) tryOnce(ctx context.Context) (grant, error) {
	var g grant
	var err error
	if q.spec.try != nil {
		g, err = q.spec.try(ctx, q.a)
	} else {
		g, err = q.c.grantReplicated(ctx, q.sh, q.a, q.cfg)
	}
	if err != nil {
		return grant{}, err
	}
	return q.read(g)
}

// read completes an attempt's reply g: the fences of a multi-permit grant,
// or where a refused attempt waits.
func (q *acquisition) read(g grant) (grant, error) {
	spec, a := q.spec, q.a
	switch {
	case g.ok && len(a.tokens) > 0:
		if len(g.reply) != len(a.tokens)+1 {
			return grant{}, wrap("acquire", spec.kind, spec.name, fmt.Errorf("unexpected acquire reply %v", g.reply))
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

// failed is the outcome of an attempt whose script call failed with err: a
// refusal tried again within a millisecond when the shape says err is a
// passing state (spec.again), else the error.
//
// On a Redis Cluster, a slot being resharded answers TRYAGAIN (a script
// whose keys are split between the two nodes), or a redirect that go-redis
// gave up following (ASK, MOVED), and a cluster that is electing answers
// CLUSTERDOWN: the script did not run, so the attempt is a refusal tried
// again after clusterRetry within the wait (with Wait(0): ErrNotAcquired,
// the reason in the message).
func (q *acquisition) failed(ctx context.Context, err error) (grant, error) {
	if q.spec.again != nil && q.spec.again(err) {
		return grant{wake: q.spec.keys.wake}, nil
	}
	if clusterPassing(err) {
		return grant{wake: q.spec.keys.wake, pttl: clusterRetry, detail: "the cluster answered " + firstWord(err.Error()) + ": its slot is moving or it is electing"}, nil
	}
	return grant{}, redisErr(ctx, "acquire", q.spec.kind, q.spec.name, err)
}

// firstWord returns s up to its first space.
func firstWord(s string) string {
	if i := strings.IndexByte(s, ' '); i >= 0 {
		return s[:i]
	}
	return s
}

// late gives g back and reports true if it arrived after its
// seam.LeaseEnd, counted from sent (a late grant: never used).
func (q *acquisition) late(ctx context.Context, g grant, sent time.Time) bool {
	a := q.a
	ttl := cmp.Or(g.ttl, a.ttl)
	if time.Now().Before(seam.LeaseEnd(sent, ttl)) {
		return false
	}
	q.giveBack(ctx, g)
	return true
}

// giveBack releases every grant of g (one, or one per attempt.tokens): a
// grant nobody will hold.
func (q *acquisition) giveBack(ctx context.Context, g grant) {
	for i, one := range q.a.each() {
		fence := g.fence
		if len(g.fences) > i {
			fence = g.fences[i]
		}
		q.c.keeper.GiveBack(ctx, q.grantOf(one, fence, 0, time.Time{}))
	}
}

// grantOf describes a Redis grant for the Keeper; ttl is the grant's TTL
// when it is shorter than the lease asked for (a hand-off), else 0.
func (q *acquisition) grantOf(a *attempt, fence int64, ttl time.Duration, sent time.Time) seam.Grant[*attempt] {
	sh, spec, cfg := q.sh, q.spec, q.cfg
	if a.ops == nil {
		a.ops = sh.ops(a)
	}
	return seam.Grant[*attempt]{StoreCounts: true,
		Shape: spec.kind, Name: spec.name, Key: sh.holdID(a), Owner: a.owner, ID: a.token,
		Token: fence, Sent: sent, TTL: cmp.Or(ttl, a.ttl), Lease: a.ttl, Renewed: cfg.Lease == 0,
		MaxHold: cfg.MaxHold, Ops: a, OnLost: cfg.OnLost,
	}
}
