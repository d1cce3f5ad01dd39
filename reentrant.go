package dlock

import (
	"context"
	"time"

	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/seam"
)

// reentrantInspector is a Lock's or FairLock's answer to Inspect.
var reentrantInspector = inspector{withLibs("reentrant_inspect.lua", "lib.lua", "inspect_lib.lua"), func(c *Client, name string) []string {
	k := c.queueKeys(name)
	return []string{k.lock, k.fence, k.queue, k.timeouts}
}}

// reentrantShape is a Lock or a FairLock: a reentrant hash with a waiter
// queue (lua/reentrant_lib.lua). strict is a FairLock's arrival order: a
// free lock goes to the first live waiter, not to the caller.
type reentrantShape struct {
	c      *Client
	strict bool
	k      queueKeys
	sp     shapeSpec
}

// reentrant returns the shape of a Lock (strict false) or a FairLock.
func (c *Client) reentrant(name string, strict bool) *reentrantShape {
	s := &reentrantShape{c: c, strict: strict, k: c.queueKeys(name)}
	s.k.box()
	s.sp = shapeSpec{kind: "lock", name: name, keys: s.k.waiting(), wake: wakeHandOff, intReply: true, replicaAck: true, owned: true, queue: &s.k, leave: lockLeaveCall}
	if strict {
		s.sp.kind, s.sp.leave = "fair", fairLeaveCall
	}
	return s
}

func (s *reentrantShape) spec() *shapeSpec { return &s.sp }

// marks are the scripts' shape mark written to the hash ("" for a Lock)
// and strict flag, for a FairLock (strict) or a Lock.
func marks(strict bool) (mark, flag any) {
	if strict {
		return "fair", "1"
	}
	return "", "0"
}

func (s *reentrantShape) acquireCall(a *attempt) scriptCall {
	mark, strict := marks(s.strict)
	return scriptCall{reentrantAcquire, append(s.k.acquireArgs(reentrantAcquire, a, 4), s.k.args[4], mark, strict, s.c.argCheck)}
}

// lockLeaveCall and fairLeaveCall are the calls by which a's Acquire of a
// Lock or a FairLock leaves the queue.
func lockLeaveCall(a *attempt) scriptCall { return reentrantLeaveCall(a, false) }
func fairLeaveCall(a *attempt) scriptCall { return reentrantLeaveCall(a, true) }

func reentrantLeaveCall(a *attempt, strict bool) scriptCall {
	c, k := a.c, a.k
	mark, flag := marks(strict)
	args := append(k.begin(reentrantLeave, 7), a.args.token, a.args.op, a.queueMember(), k.args[4], mark, flag, c.argCheck)
	return scriptCall{reentrantLeave, args}
}

func (s *reentrantShape) holdID(a *attempt) string { return s.k.lock + "|" + a.owner }

func (s *reentrantShape) ops(a *attempt) holdOps { return (*reentrantOps)(a) }

// reentrantOps are a Lock or FairLock grant's operations: the attempt that
// won it, held under its owner.
type reentrantOps attempt

func (o *reentrantOps) renewCalls(ttl time.Duration) []scriptCall {
	return []scriptCall{extendCall(lockExtend, o.k.args[0], o.args.token, o.c.ttlArg(ttl))}
}

func (o *reentrantOps) extend(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := o.c.callSettled(ctx, extendCall(lockExtend, o.k.args[0], o.args.token, o.c.ttlArg(ttl)))
	return n == 1, err
}

// releaseCall undoes one hold: the call's operation id (one per Unlock)
// makes a retry that was already applied change nothing.
func (o *reentrantOps) releaseCall() scriptCall {
	c := o.c
	return scriptCall{reentrantRelease, append(o.k.begin(reentrantRelease, 4), o.args.token, ids.Op(), o.k.args[4], c.argCheck)}
}

func (o *reentrantOps) releaseCalls() []scriptCall { return []scriptCall{o.releaseCall()} }

func (o *reentrantOps) release(ctx context.Context) (seam.Released, error) {
	n, err := o.c.callSettled(ctx, o.releaseCall())
	return seam.Released(n), err
}

func (o *reentrantOps) verify(ctx context.Context) (bool, error) {
	return verifyOwned(ctx, o.c, o.k.lock, "o", func(v string) bool { return v == o.owner })
}

// lockOwned reads a Lock key and reports whether holder owns it.
func lockOwned(ctx context.Context, c *conn, key, holder string) (bool, error) {
	return verifyOwned(ctx, c, key, "o", func(v string) bool { return v == holder })
}
