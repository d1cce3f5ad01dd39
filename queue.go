package dlock

import (
	"context"
	"time"

	"github.com/dlockgo/dlock/seam"

	"github.com/redis/go-redis/v9"
)

// The locks that queue their waiters in Redis (Mutex, Lock, FairLock) hand
// themselves over on the server: a release grants the lock to the first live
// waiter of the queue and publishes the grant (its fence and TTL) on that
// waiter's Client channel, so a contended hand-off costs the release's round
// trip and one message, wakes one Client, and leaves no race to the key (see
// lua/queue_lib.lua).
//
// A waiter refreshes its place with every attempt, at least every third of
// its queue timeout (QueueTimeout, default 5 s); a waiter
// that stops (process killed, paused, cut off) is skipped once its timeout
// has passed, and a lock handed to it expires by then. A release passes over
// a waiter whose Client does not listen (the message reached nobody): it
// keeps its place, and the next waiter gets the lock. A waiter that gives
// up leaves the queue at once and gives back a hand-off that raced with its
// giving up (retried in the background while Redis cannot be reached). An
// Acquire with Wait(0) never queues.

// acquireArgs are the keys and ARGV the queue acquire scripts share:
// holder, op, lease, metadata, clock, queue timeout, Client id,
// queued; extra arguments follow them.
func (k *queueKeys) acquireArgs(s *luaScript, a *attempt, extra int) []any {
	c := a.c
	return append(k.begin(s, 8+extra), a.args.token, a.args.op, a.args.lease, a.args.meta, a.clockArg(), a.args.queue, c.argClient, a.queuedArg())
}

// usableHandoff reports whether a hand-off for ttl may be taken without a
// claim: its lease, counted from first (the first attempt's send time: the
// grant came later), leaves at least half of ttl on the local clock.
func usableHandoff(first time.Time, ttl time.Duration) bool {
	return time.Until(seam.LeaseEnd(first, ttl)) > ttl/2
}

// extendCall is the call of a one-key extend script (mutex_extend.lua,
// lock_extend.lua) that sets key's TTL if holder still holds it.
func extendCall(s *luaScript, key, holder, ttl any) scriptCall {
	return scriptCall{s, append(s.begin(1, 3), key, holder, ttl)}
}

// ownedBy reports whether holder holds the lock a read returned: a Mutex
// value starts with its token, a Lock hash's o field is its owner.
func ownedBy(cmd *redis.StringCmd, owned func(v string) bool) (bool, error) {
	v, err := cmd.Result()
	switch {
	case isNil(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return owned(v), nil
}

// verifyOwned reads key (GET, or HGET of field when field is not "") and
// reports whether owned says the value is held for us.
func verifyOwned(ctx context.Context, c *conn, key, field string, owned func(v string) bool) (bool, error) {
	if field == "" {
		return ownedBy(c.rdb.Get(ctx, key), owned)
	}
	return ownedBy(c.rdb.HGet(ctx, key, field), owned)
}
