package dlock

import "strings"

// The keys of the locks in Redis: a lock called name lives under
// <prefix>{name}, so that all its keys share the hash slot of {name}.

// lockKeys are the keys of one lock name: the lock, the fence counter of
// its slot, and its wake channel.
type lockKeys struct {
	lock, fence, wake string
}

// keys returns the keys of the lock called name.
func (c *conn) keys(name string) lockKeys {
	base := c.lockKey(name)
	return lockKeys{lock: base, fence: c.fenceKey(base), wake: base + ":wake"}
}

// lockKey is the key <prefix>{name} of the lock called name.
func (c *conn) lockKey(name string) string {
	return c.prefix + "{" + name + "}"
}

// fenceKey is the fence counter of the hash slot of the lock key lock:
// one for every lock name of the slot (see lua/fence.lua).
func (c *conn) fenceKey(lock string) string {
	return c.prefix + "fence:{" + slotTag(keySlot(lock)) + "}"
}

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

func (c *conn) queueKeys(name string) queueKeys {
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
