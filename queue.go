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
// Client's waiters (lockKeys.wake .. ":" .. Client id).
type queueKeys struct {
	lockKeys
	queue, timeouts, own string
}

func (c *Client) queueKeys(name string) queueKeys {
	k := c.keys(name)
	return queueKeys{lockKeys: k, queue: k.lock + ":queue", timeouts: k.lock + ":timeouts", own: k.wake + ":" + c.sub.id}
}

// list is the KEYS of the queue scripts.
func (k queueKeys) list() []string { return []string{k.lock, k.fence, k.queue, k.timeouts} }

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

// queueArgs are the ARGV the queue acquire scripts share: holder, op, lease,
// metadata, fence TTL, queue timeout, wake channel, Client id, queued.
func (c *Client) queueArgs(a attempt, k queueKeys) []any {
	queued := "0"
	if a.queued {
		queued = "1"
	}
	return []any{a.token, a.op, ms(a.ttl), a.meta, ms(c.fenceTTL), ms(a.queue), k.wake, c.sub.id, queued}
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
	*keyOps
	k      queueKeys
	handOn *redis.Script
}

func (o queueOps) release(ctx context.Context, op string) (releaseResult, error) {
	call := scriptCall{o.handOn, o.k.list(), []any{o.holder, op, o.k.wake, ms(o.c.fenceTTL), o.c.listenCheck()}}
	n, err := call.run(ctx, o.c.rdb).Int64()
	return releaseResult(n), err
}

// usableHandoff reports whether a hand-off for ttl may be taken without a
// claim: its lease, counted from first (the first attempt's send time: the
// grant came later), leaves at least half of ttl on the local clock.
func usableHandoff(first time.Time, ttl time.Duration) bool {
	return time.Until(first.Add(ttl-drift(ttl))) > ttl/2
}
