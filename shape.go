package dlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/seam"
)

// redisShape is the whole contract between a lock shape kept in Redis and
// the acquire loop every shape shares (acquire.go). A shape states what it
// is in one shapeSpec and fills in four methods; nothing is found by type
// assertion. A new shape is its own file, its own Lua scripts and its own
// test, and one line in inspect.go's list of inspectors.
type redisShape interface {
	// spec describes the shape to the acquire loop.
	spec() *shapeSpec
	// acquireCall is the script call that grants (or re-enters) the lock.
	acquireCall(a *attempt) scriptCall
	// ops drives a granted attempt.
	ops(a *attempt) holdOps
	// holdID identifies the grant among a Client's holds: a reentrant
	// shape returns the same id for the same owner (its Leases share one
	// hold), other shapes one id per grant.
	holdID(a *attempt) string
}

// shapeSpec is what the acquire loop knows of a shape. A nil hook takes the
// default written next to it.
type shapeSpec struct {
	kind string   // "mutex", "lock", ... (events, errors, Lease.Name's shape)
	name string   // the lock name (a MultiLock: its members, joined)
	keys lockKeys // the lock, its fence counter, its wake channel
	wake wakeMode
	// intReply: the acquire script answers one integer (see intGrant)
	// instead of an array.
	intReply bool
	// owned: the lock is held under its owner (a reentrant shape: the
	// ctx's owner, or a new one); otherwise under a token of the call's own.
	owned bool
	// queue is a queued shape's keys (Mutex, Lock, FairLock), for its
	// attempts; nil for the others.
	queue *queueKeys
	// tokens, if set, gives the attempt the holder ids of what it asks for
	// (a Semaphore's permits).
	tokens func(a *attempt)
	// check validates the shape's own arguments; nil: the name is checked.
	check func() error
	// try runs one attempt; nil: acquireCall once (followed by WAIT on the
	// same connection when ReplicaAck asks for it).
	try func(ctx context.Context, a *attempt) (grant, error)
	// replicaAck: ReplicaAck may be asked of this shape (its grant is one
	// script on one master).
	replicaAck bool
	// again, if set, says that an error reply to the acquire script is a
	// passing state: the attempt counts as refused and is tried again soon
	// (a Semaphore whose count its own SetPermits is changing).
	again func(err error) bool
	// refusedOn picks the channel a refused attempt waits on from the
	// script's reply; nil: keys.wake.
	refusedOn func(reply []int64) string
	// leave removes a waiter's place in Redis (and undoes a grant made to
	// that attempt which its caller never saw) when Acquire returns without
	// a lease. nil: the shape's waiters keep no place in Redis. Waiters with
	// a place refresh it on every attempt, at least every third of the
	// queue timeout.
	leave func(a *attempt) scriptCall
}

// wakeMode is how a shape's waiters learn that the lock was released.
type wakeMode int

const (
	// wakeShared: a release publishes on the lock's channel and wakes the
	// longest-waiting local waiter of every Client; a waiter that gives up
	// passes its wake-up on.
	wakeShared wakeMode = iota
	// wakeHandOff: a release hands the lock to the first queued waiter by a
	// message addressed to it; a wake-up is never shared.
	wakeHandOff
	// wakeLocal: only releases made through the same Client wake waiters
	// (no subscription: across processes they would all wake at once).
	wakeLocal
)

// attempt is one Acquire call: ids that stay the same across its retries, so
// that a retry whose first reply was lost is recognised as ours. Once
// granted it is the grant's operations (the seam's GrantOps): it lives as
// long as the hold, and a call boxes its fields by pointer.
type attempt struct {
	c      *conn
	k      *queueKeys // the keys of a queued shape (Mutex, Lock, FairLock)
	owner  string     // the lease context's owner ("" when none is needed yet)
	token  string     // the holder id written to Redis (owner, or per-call token)
	tokens []string   // several holder ids granted at once (Semaphore permits), one Lease each
	op     string     // operation id of this Acquire call
	meta   string     // holder metadata
	ttl    time.Duration
	queue  time.Duration // a queued shape's place timeout; 0: try without queueing (Wait(0))
	queued bool          // an earlier attempt of this call queued it
	clock  int64         // this try's time in µs (a free lock's fence: see lua/fence.lua)
	value  string        // a Mutex's value for this try ("": not made yet)

	leaseMs, queueMs int64       // ttl and queue in ms
	args             attemptArgs // the script arguments above, boxed once
	ops              holdOps     // the grant's operations, once granted
}

// attemptArgs are an attempt's script arguments, boxed once per Acquire
// call (a call's retries and its grant's releases reuse them); clock once
// per try, when a script asks for it (clockArg).
type attemptArgs struct{ token, op, meta, lease, queue, clock any }

// box boxes a's arguments; the queue timeout may be set later (setQueue).
func (a *attempt) box() *attempt {
	a.args = attemptArgs{token: a.token, op: a.op, meta: a.meta, lease: a.c.argLease, queue: 0}
	if a.leaseMs != a.c.leaseMs {
		a.args.lease = a.leaseMs
	}
	return a
}

// setQueue sets a's queue timeout (0: try without queueing).
func (a *attempt) setQueue(d time.Duration) {
	a.queue, a.queueMs = d, ms(d)
	switch {
	case d == 0:
		a.args.queue = 0
	case a.queueMs == a.c.queueMs:
		a.args.queue = a.c.argQueue
	default:
		a.args.queue = a.queueMs
	}
}

// newAttempt returns the attempt of one Acquire call of the shape spec
// describes by owner (the ctx's; "" if it carries none) for a lease of ttl,
// its grant made at now.
// limit returns what refuses an acquisition's options of the shape:
// noLockDelay, and no ReplicaAck unless its grant is one script on one
// master. (Functions, not a method value: Begin's argument then costs no
// allocation.)
func (spec *shapeSpec) limit() func(seam.Options) error {
	if spec.replicaAck {
		return noLockDelay
	}
	return noReplicaAck
}

// noLockDelay refuses a lock-delay: Redis has none.
func noLockDelay(o seam.Options) error { return o.NoLockDelay("Redis") }

// noReplicaAck refuses ReplicaAck and a lock-delay.
func noReplicaAck(o seam.Options) error {
	if o.Replicas != 0 {
		return fmt.Errorf("%w: this shape does not take ReplicaAck", ErrInvalidArgument)
	}
	return noLockDelay(o)
}

func (spec *shapeSpec) newAttempt(c *conn, owner string, ttl time.Duration, now time.Time) *attempt {
	var a *attempt
	if spec.owned {
		a = ownedAttempt(c, owner, ttl, now)
	} else {
		a = newAttempt(c, owner, ttl, now)
	}
	a.k = spec.queue
	if spec.tokens != nil {
		spec.tokens(a)
	}
	return a
}

// newAttempt is an attempt whose token is new (32 hex characters) and
// whose operation id is its first 16: one allocation for both, the holder
// metadata and the Mutex value of its first try (token|clock|metadata).
func newAttempt(c *conn, owner string, ttl time.Duration, now time.Time) *attempt {
	a := &attempt{c: c, owner: owner, ttl: ttl, leaseMs: ms(ttl), clock: now.UnixMicro()}
	var buf [160]byte
	b := ids.AppendToken(buf[:0])
	b = strconv.AppendInt(append(b, '|'), a.clock, 10)
	m := len(b)
	b = c.appendMeta(append(b, '|'), now)
	s := string(b)
	a.token, a.op, a.meta, a.value = s[:32], s[:16], s[m+1:], s
	return a.box()
}

// ownedAttempt is an attempt held under owner (a reentrant shape's holder
// id: the ctx's owner, or a new one), with an operation id of its own.
func ownedAttempt(c *conn, owner string, ttl time.Duration, now time.Time) *attempt {
	if owner == "" {
		a := newAttempt(c, "", ttl, now)
		a.owner = a.token
		return a
	}
	a := &attempt{c: c, owner: owner, token: owner, op: ids.Op(), meta: c.holderMeta(now), ttl: ttl, leaseMs: ms(ttl), clock: now.UnixMicro()}
	return a.box()
}

// retry makes a's next try at now: its clock, and the value made from it.
func (a *attempt) retry(now time.Time) {
	a.clock, a.args.clock, a.value = now.UnixMicro(), nil, ""
}

// clockArg is this try's clock as a script argument.
func (a *attempt) clockArg() any {
	if a.args.clock == nil {
		a.args.clock = a.clock
	}
	return a.args.clock
}

// mutexValue is the value a Mutex grant to this try writes (mutex_lib.lua):
// token, '+' if an earlier try queued the call, '|', clock, '|', metadata.
func (a *attempt) mutexValue() string {
	if a.value == "" {
		mark := ""
		if a.queued {
			mark = "+"
		}
		a.value = a.token + mark + "|" + strconv.FormatInt(a.clock, 10) + "|" + a.meta
	}
	return a.value
}

// queueSpec is a Mutex try's queue argument (mutex_acquire.lua): "0", or
// the queue timeout in ms, '|', the Client's id.
func (a *attempt) queueSpec() any {
	switch {
	case a.queue == 0:
		return "0"
	case a.queueMs == a.c.queueMs:
		return a.c.argQueueSpec
	}
	return strconv.FormatInt(a.queueMs, 10) + "|" + a.c.sub.id
}

// queuedArg is "1" if an earlier attempt of this call queued it.
func (a *attempt) queuedArg() any {
	if a.queued {
		return "1"
	}
	return "0"
}

// each returns the attempt once per grant it asks for (several for a
// multi-permit acquisition).
func (a *attempt) each() []*attempt {
	if len(a.tokens) == 0 {
		return []*attempt{a}
	}
	out := make([]*attempt, len(a.tokens))
	for i, tok := range a.tokens {
		one := *a
		one.token, one.tokens, one.ops = tok, nil, nil
		out[i] = &one
	}
	return out
}

// Release, Extend and Verify make a granted attempt the seam's GrantOps:
// its shape's hold operations, with Redis error replies mapped to
// sentinels.

func (a *attempt) Release(ctx context.Context) (seam.Released, error) {
	res, err := a.ops.release(ctx)
	return res, redisCause(err)
}

func (a *attempt) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	ok, err := a.ops.extend(ctx, ttl)
	return ok, redisCause(err)
}

func (a *attempt) Verify(ctx context.Context) (bool, error) {
	ok, err := a.ops.verify(ctx)
	return ok, redisCause(err)
}

// queueMember is the attempt's member of a queue (see lua/queue_lib.lua).
func (a *attempt) queueMember() string {
	return a.op + "|" + a.token + "|" + strconv.FormatInt(ms(a.ttl), 10) + "|" + a.c.sub.id + "|" + a.meta
}
