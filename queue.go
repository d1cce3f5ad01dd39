package dlock

import (
	"context"
	"strconv"
	"strings"
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

// queueKeys are the keys of a lock that queues its waiters: the lock's keys,
// its queue and the waiters' deadlines, and own, the wake channel of this
// Client's waiters (lockKeys.wake .. ":" .. Client id). They are slices of
// one string, built once per lock object; box makes them script arguments
// (args: lock, fence, queue, timeouts, wake) once the keys are where they
// stay.
type queueKeys struct {
	lockKeys
	queue, timeouts, own string
	args                 [5]any
}

func (c *Client) queueKeys(name string) queueKeys {
	var b strings.Builder
	n := len(c.prefix) + len(name) + 2
	b.Grow(3*n + len(":queue:timeouts:wake:") + len(c.sub.id) + len(c.prefix) + len("fence:{00000}"))
	base := func() { b.WriteString(c.prefix); b.WriteByte('{'); b.WriteString(name); b.WriteByte('}') }
	base()
	b.WriteString(":queue")
	base()
	b.WriteString(":timeouts")
	base()
	b.WriteString(":wake:")
	b.WriteString(c.sub.id)
	own := b.Len()
	b.WriteString(c.prefix)
	b.WriteString("fence:{")
	b.WriteString(slotTag(keySlot(b.String()[:n]))) // the lock key's slot
	b.WriteByte('}')
	s := b.String()
	var q queueKeys
	q.lock, q.fence = s[:n], s[own:]
	q.queue, s = s[:n+6], s[n+6:]
	q.timeouts, s = s[:n+9], s[n+9:]
	q.wake, q.own = s[:n+5], s[:own-2*n-15]
	return q
}

// box makes k's keys script arguments: pointers to them (go-redis writes
// the string they point to), so boxing allocates nothing; k must stay
// where it is (a field of the lock object) as long as its calls do.
func (k *queueKeys) box() {
	k.args = [5]any{&k.lock, &k.fence, &k.queue, &k.timeouts, &k.wake}
}

// waiting is the lockKeys a queued shape reports: its waiters listen on own.
func (k *queueKeys) waiting() lockKeys {
	l := k.lockKeys
	l.wake = k.own
	return l
}

// begin starts a call of s on the lock's four keys (lock, fence counter,
// queue, deadlines) with room for n arguments.
func (k *queueKeys) begin(s *luaScript, n int) []any {
	return append(s.begin(4, 4+n), k.args[0], k.args[1], k.args[2], k.args[3])
}

// acquireArgs are the keys and ARGV the queue acquire scripts share:
// holder, op, lease, metadata, clock, queue timeout, Client id,
// queued; extra arguments follow them.
func (k *queueKeys) acquireArgs(s *luaScript, a *attempt, extra int) []any {
	c := a.c
	return append(k.begin(s, 8+extra), a.args.token, a.args.op, a.args.lease, a.args.meta, a.clockArg(), a.args.queue, c.argClient, a.queuedArg())
}

// queueMember is the attempt's member of a queue (see lua/queue_lib.lua).
func (c *Client) queueMember(a *attempt) string {
	return a.op + "|" + a.token + "|" + strconv.FormatInt(ms(a.ttl), 10) + "|" + c.sub.id + "|" + a.meta
}

// usableHandoff reports whether a hand-off for ttl may be taken without a
// claim: its lease, counted from first (the first attempt's send time: the
// grant came later), leaves at least half of ttl on the local clock.
func usableHandoff(first time.Time, ttl time.Duration) bool {
	return time.Until(seam.LeaseEnd(first, ttl)) > ttl/2
}

// ttlArg is a renewal's or extension's TTL in ms as a script argument.
func (c *Client) ttlArg(ttl time.Duration) any {
	if n := ms(ttl); n != c.leaseMs {
		return n
	}
	return c.argLease
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
func verifyOwned(ctx context.Context, c *Client, key, field string, owned func(v string) bool) (bool, error) {
	if field == "" {
		return ownedBy(c.rdb.Get(ctx, key), owned)
	}
	return ownedBy(c.rdb.HGet(ctx, key, field), owned)
}
