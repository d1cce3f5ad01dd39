package zklock

import (
	"sync"
	"time"
)

// How long a session surely lives at the quorum, from what the client saw.
//
// The leader alone expires sessions, one session timeout T after the last
// touch it knows of. A request touches the session on the server that
// takes it; a follower passes its touches on to the leader only in its
// replies to the leader's pings, which come every half tick. ZooKeeper
// negotiates no session shorter than two ticks (its default
// minSessionTimeout), so a touch reaches the leader at most relay = T/4
// after it was made, if the follower still reaches the leader then.
//
// A follower cut off from its leader still answers reads and pings for up
// to syncLimit ticks, on its own; it cannot answer a sync, which it
// forwards to the leader and answers only when the leader has. So the
// heartbeat is a sync, and an answered one proves what the leader saw: it
// got every ping reply the follower sent before forwarding that sync, so
// every touch the follower made a relay or more before it (the touch of
// each candidate below). The session lives at the leader until at least
// one such touch plus T.
//
// An isolated leader answers syncs itself until it sees it lost its
// quorum, at most syncLimit+1 ticks after the cut; the majority's new
// leader, elected at the earliest syncLimit ticks less half a tick (plus
// the election's 200 ms wait) after the cut, restarts every session's
// timeout when it takes over. A renewal therefore never reaches past its
// sync's send time plus 2T/3: the lease ends T/3 before the session could
// end at the new leader, which covers the old leader's last 1.5 ticks
// less 200 ms if T is at least 4.5 ticks (ZooKeeper's default 2 s tick:
// 9 s; dlock's default session is 10 s).
//
// A request answered through the quorum (a create, a sync) proves by
// itself that the server reached the leader when it was made; the
// client's connection pings every T/3 (go-zookeeper), so some touch of the
// session at most T/3 + relay older reached the leader: the session lives
// at least firstSpan = 5T/12 past such a request's send time. That is the
// first deadline of a grant, and the longest Extend. (A waiter's grant
// comes from a listing, a read, made at once after the change that
// granted it, the deletion before it, which its server got from the
// leader: the drift margin covers the moment between the two.) Every
// answered request is a candidate, whose touch a later sync may prove;
// the grant's is proven by the first sync, sent a relay after it.
//
// The argument takes T to be the session timeout the server negotiated
// (Dial uses the smaller of that and the one asked for; New must be given
// it) and at least two ticks.

// relay bounds how long a session touch takes to reach the leader.
func relay(t time.Duration) time.Duration { return t / 4 }

// firstSpan is how long past the send time of a request answered through
// the quorum its session surely lives there.
func firstSpan(t time.Duration) time.Duration { return t - t/3 - relay(t) }

// reach is how far past an answered heartbeat's send time a renewal may
// hold a lease.
func reach(t time.Duration) time.Duration { return t - t/3 }

// candidate is a request of the session whose touch may have reached the
// leader: sent, then answered (requests merged into one: the latest send
// and answer, and the first answer).
type candidate struct{ sent, first, answered time.Time }

// liveness is what the client knows of its current session's life at the
// leader. It is safe for concurrent use.
type liveness struct {
	mu    sync.Mutex
	sid   int64
	cands []candidate // not yet proven, in the order they were answered
	base  time.Time   // the latest send time proven to have reached the leader
}

// reset starts over for session sid; v.mu is held.
func (v *liveness) reset(sid int64) {
	if sid != v.sid {
		v.sid, v.cands, v.base = sid, v.cands[:0], time.Time{}
	}
}

// answered records a request of session sid sent at sent and answered now.
// Requests answered within merge of the first of them are one candidate
// (the later send, the later answer: the list stays short however many
// grants a client makes, and a steady stream of requests is proven one
// merge window at a time, never pushed back for as long as it lasts).
func (v *liveness) answered(sid int64, sent time.Time, merge time.Duration) {
	now := time.Now()
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reset(sid)
	if k := len(v.cands); k > 0 && now.Sub(v.cands[k-1].first) < merge {
		last := &v.cands[k-1]
		last.sent, last.answered = maxTime(last.sent, sent), now
		return
	}
	v.cands = append(v.cands, candidate{sent: sent, first: now, answered: now})
}

// prove records a sync of session sid sent at sent and answered: every
// candidate answered relay before it is proven. It returns the latest send
// time proven, and whether it moved.
func (v *liveness) prove(sid int64, sent time.Time, relay time.Duration) (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reset(sid)
	cut := sent.Add(-relay)
	base, i := v.base, 0
	for ; i < len(v.cands) && !v.cands[i].answered.After(cut); i++ {
		base = maxTime(base, v.cands[i].sent)
	}
	v.cands = append(v.cands[:0], v.cands[i:]...)
	moved := base.After(v.base)
	v.base = base
	return base, moved
}

// provable returns when a sync sent proves the oldest candidate of session
// sid not proven yet (a relay after it was answered); ok is false if there
// is none.
func (v *liveness) provable(sid int64, relay time.Duration) (at time.Time, ok bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if sid != v.sid || len(v.cands) == 0 {
		return time.Time{}, false
	}
	return v.cands[0].answered.Add(relay), true
}

// latest returns when the last candidate of session sid was answered.
func (v *liveness) latest(sid int64) (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if sid != v.sid || len(v.cands) == 0 {
		return time.Time{}, false
	}
	return v.cands[len(v.cands)-1].answered, true
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
