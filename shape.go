package dlock

import (
	"context"
	"time"
)

// redisShape is the whole contract between a lock shape kept in Redis and
// the acquire loop every shape shares (acquire.go). A shape states what it
// is in one shapeSpec and fills in four methods; nothing is found by type
// assertion. A new shape is its own file, its own Lua scripts and its own
// test: nothing else changes.
type redisShape interface {
	// spec describes the shape to the acquire loop.
	spec() shapeSpec
	// attempt prepares one Acquire call by owner for a lease of ttl.
	attempt(owner string, ttl time.Duration, meta string) attempt
	// acquireCall is the script call that grants (or re-enters) the lock.
	acquireCall(a attempt) scriptCall
	// ops drives a granted attempt.
	ops(a attempt) holdOps
	// holdID identifies the grant among a Client's holds: a reentrant
	// shape returns the same id for the same owner (its Leases share one
	// hold), other shapes one id per grant.
	holdID(a attempt) string
}

// shapeSpec is what the acquire loop knows of a shape. A nil hook takes the
// default written next to it.
type shapeSpec struct {
	kind string   // "mutex", "lock", ... (events, errors, Lease.Name's shape)
	name string   // the lock name (a MultiLock: its members, joined)
	keys lockKeys // the lock, its fence counter, its wake channel
	wake wakeMode
	// check validates the shape's own arguments; nil: the name is checked.
	check func() error
	// try runs one attempt; nil: acquireCall once (followed by WAIT on the
	// same connection when ReplicaAck asks for it).
	try func(ctx context.Context, a attempt) (grant, error)
	// replicaAck: ReplicaAck may be asked of this shape (its grant is one
	// script on one master).
	replicaAck bool
	// refusedOn picks the channel a refused attempt waits on from the
	// script's reply; nil: keys.wake.
	refusedOn func(reply []int64) string
	// leave removes a waiter's place in Redis (and undoes a grant made to
	// that attempt which its caller never saw) when Acquire returns without
	// a lease. nil: the shape's waiters keep no place in Redis. Waiters with
	// a place refresh it on every attempt, at least every third of the
	// queue timeout.
	leave func(a attempt) scriptCall
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
// that a retry whose first reply was lost is recognised as ours.
type attempt struct {
	owner  string   // the lease context's owner
	token  string   // the holder id written to Redis (owner, or per-call token)
	tokens []string // several holder ids granted at once (Semaphore permits), one Lease each
	op     string   // operation id of this Acquire call
	ttl    time.Duration
	meta   string
	queue  time.Duration // a queued shape's place timeout; 0: try without queueing (Wait(0))
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
