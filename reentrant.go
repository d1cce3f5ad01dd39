package dlock

import (
	"context"
	"time"
)

// reentrantShape is a Lock or a FairLock: a reentrant hash with a waiter
// queue (lua/reentrant_lib.lua). strict is a FairLock's arrival order: a
// free lock goes to the first live waiter, not to the caller.
type reentrantShape struct {
	c      *Client
	name   string
	shape  string // kind, and the mark written to the hash ("" for a Lock)
	strict bool
	k      queueKeys
	marks  [2]any // the scripts' shape mark and strict flag (see mark)
	sp     shapeSpec
}

// reentrant returns the shape of a Lock (strict false) or a FairLock; it is
// used by pointer (spec's leave hook points into it).
func (c *Client) reentrant(name string, strict bool) *reentrantShape {
	s := &reentrantShape{c: c, name: name, shape: "lock", k: c.queueKeys(name), marks: [2]any{"", "0"}}
	if strict {
		s.shape, s.strict, s.marks = "fair", true, [2]any{"fair", "1"}
	}
	s.sp = shapeSpec{kind: s.shape, name: s.name, keys: s.k.waiting(), wake: wakeHandOff, replicaAck: true, leave: s.leaveCall}
	return s
}

func (s *reentrantShape) spec() shapeSpec { return s.sp }

func (s *reentrantShape) attempt(owner string, ttl time.Duration, meta string) attempt {
	return attempt{owner: owner, token: owner, op: newOpID(), ttl: ttl, meta: meta}
}

// mark is the shape mark of the hash ("" for a Lock) and strict as "0"/"1".
func (s *reentrantShape) mark() (any, any) { return s.marks[0], s.marks[1] }

func (s *reentrantShape) acquireCall(a attempt) scriptCall {
	mark, strict := s.mark()
	return scriptCall{reentrantAcquire, s.k.list, s.k.acquireArgs(a, s.k.args.wake, mark, strict, s.k.args.check)}
}

func (s *reentrantShape) leaveCall(a attempt) scriptCall {
	mark, strict := s.mark()
	return scriptCall{reentrantLeave, s.k.list, []any{a.owner, a.op, s.c.queueMember(a), s.k.args.wake, s.k.args.fenceTTL, mark, strict, s.k.args.check}}
}

func (s *reentrantShape) holdID(a attempt) string { return s.k.lock + "|" + a.owner }

func (s *reentrantShape) ops(a attempt) holdOps {
	return &queueOps{keyOps{c: s.c, keys: s.k.lockKeys, lockList: s.k.list[:1], holder: a.owner, extendScript: lockExtend, owned: lockOwned}, &s.k, reentrantRelease, true}
}

// lockOwned reads a Lock key and reports whether holder owns it.
func lockOwned(ctx context.Context, c *Client, key, holder string) (bool, error) {
	o, err := c.rdb.HGet(ctx, key, "o").Result()
	if err != nil {
		if isNil(err) {
			return false, nil
		}
		return false, err
	}
	return o == holder, nil
}
