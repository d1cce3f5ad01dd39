package dlock

import (
	"context"
	"strconv"
	"time"

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
// its queue timeout (QueueTimeout, default DefaultQueueTimeout); a waiter
// that stops (process killed, paused, cut off) is skipped once its timeout
// has passed, and a lock handed to it expires by then. A release passes over
// a waiter whose Client does not listen (the message reached nobody): it
// keeps its place, and the next waiter gets the lock. A waiter that gives
// up leaves the queue at once and gives back a hand-off that raced with its
// giving up (retried in the background while Redis cannot be reached). An
// Acquire with Wait(0) never queues.

// queueKeys are the keys of a lock that queues its waiters: the lock's keys,
// its queue and the waiters' deadlines, and own, the wake channel of this
// Client's waiters (lockKeys.wake .. ":" .. Client id). They are built once
// per lock object, with the script arguments that never change (args), so
// that a call only adds what is its own.
type queueKeys struct {
	lockKeys
	queue, timeouts, own string
	list                 []string // the KEYS of the queue scripts; never modified
	args                 queueArgs
}

// queueArgs are the fixed ARGV of a lock's queue scripts, boxed once.
type queueArgs struct {
	fenceTTL, client, wake, check any
	lease, queue                  any   // ms of the Client's default lease and of DefaultQueueTimeout
	leaseMs, queueMs              int64 // their values
}

func (c *Client) queueKeys(name string) queueKeys {
	k := c.keys(name)
	q := queueKeys{lockKeys: k, queue: k.lock + ":queue", timeouts: k.lock + ":timeouts", own: k.wake + ":" + c.sub.id}
	q.list = []string{k.lock, k.fence, q.queue, q.timeouts}
	q.args = queueArgs{fenceTTL: ms(c.fenceTTL), client: c.sub.id, wake: k.wake, check: c.listenCheck(),
		leaseMs: ms(c.timeout), queueMs: ms(DefaultQueueTimeout)}
	q.args.lease, q.args.queue = q.args.leaseMs, q.args.queueMs
	return q
}

// waiting is the lockKeys a queued shape reports: its waiters listen on own.
func (k queueKeys) waiting() lockKeys {
	l := k.lockKeys
	l.wake = k.own
	return l
}

// queueMember is the attempt's member of a queue (see lua/queue_lib.lua).
func (c *Client) queueMember(a attempt) string {
	return a.op + "|" + a.token + "|" + strconv.FormatInt(ms(a.ttl), 10) + "|" + c.sub.id + "|" + a.meta
}

// boxed returns d in ms as a script argument, the boxed value when d is in
// ms what it holds.
func boxed(d time.Duration, v int64, box any) any {
	if n := ms(d); n != v {
		return n
	}
	return box
}

// acquireArgs are the ARGV the queue acquire scripts share: holder, op,
// lease, metadata, fence TTL, queue timeout, Client id, queued; extra (at
// most 4) follow them.
func (k *queueKeys) acquireArgs(a attempt, extra ...any) []any {
	queued := "0"
	if a.queued {
		queued = "1"
	}
	args := make([]any, 8, 12)
	args[0], args[1], args[2], args[3] = a.token, a.op, boxed(a.ttl, k.args.leaseMs, k.args.lease), a.meta
	args[4], args[5], args[6], args[7] = k.args.fenceTTL, boxed(a.queue, k.args.queueMs, k.args.queue), k.args.client, queued
	return append(args, extra...)
}

// listenCheck is the scripts' check flag: "1" when a hand-off must reach a
// subscriber of the waiter's Client channel (so a waiter whose Client is gone,
// cut off or not subscribed yet is passed over and keeps its place), "0" on a
// Cluster, where PUBLISH counts the subscribers of one node only.
func (c *Client) listenCheck() string {
	if _, cluster := c.rdb.(*redis.ClusterClient); cluster {
		return "0"
	}
	return "1"
}

// queueOps is a queued lock's key operations, with a release that hands the
// lock to the first live waiter.
type queueOps struct {
	keyOps
	k      *queueKeys
	handOn *redis.Script
	withOp bool // the release script takes the Unlock call's operation id (a Mutex's does not: its token makes a release idempotent)
}

func (o *queueOps) release(ctx context.Context, op string) (releaseResult, error) {
	a := &o.k.args
	args := []any{o.holder, a.wake, a.fenceTTL, a.check}
	if o.withOp {
		args = []any{o.holder, op, a.wake, a.fenceTTL, a.check}
	}
	n, err := scriptCall{o.handOn, o.k.list, args}.run(ctx, o.c.rdb).Int64()
	return releaseResult(n), err
}

// usableHandoff reports whether a hand-off for ttl may be taken without a
// claim: its lease, counted from first (the first attempt's send time: the
// grant came later), leaves at least half of ttl on the local clock.
func usableHandoff(first time.Time, ttl time.Duration) bool {
	return time.Until(first.Add(ttl-Drift(ttl))) > ttl/2
}
