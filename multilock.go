package dlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/seam"

	"github.com/redis/go-redis/v9"
)

var (
	multiAcquire = withLibs("multi_acquire.lua", "fence.lua", "lib.lua", "reentrant_hash.lua")
	multiRelease = withLibs("multi_release.lua", "fence.lua", "lib.lua", "reentrant_hash.lua", "queue_lib.lua", "reentrant_lib.lua")
	multiExtend  = plain("multi_extend.lua")
)

// multiLock is a Client's MultiLock.
type multiLock struct {
	c     *Client
	names []string // sorted

	once   sync.Once
	ks     []queueKeys // the members' keys, made on first use
	keys   []string    // every member's keys as script KEYS
	single bool        // oneSlot's answer
}

// MultiLock returns the lock over names (in any order), which locks them
// as one (Redisson's RedissonMultiLock): it is
// acquired only when every name is, and an attempt that cannot take them all
// gives back whatever it took before it waits or returns. Names are taken in
// one canonical (sorted) order whatever order the caller gives, so two
// MultiLocks over overlapping names never deadlock each other.
//
// Every member is a reentrant Lock: a MultiLock excludes a Lock on any of
// its names, and the owner of a Lock may take a MultiLock that includes it
// (that member is re-entered). On a standalone or Sentinel server, or on a
// Cluster when every member's keys share one hash slot, an attempt is one
// atomic script; across Cluster slots the members are taken one by one in
// canonical order, with rollback.
//
// The lease is lost as soon as any member is lost (deleted, expired, taken).
// Its Token is the largest of the members' tokens: a new MultiLock on names
// that include one of an earlier grant's names gets a larger token while the
// members' counters live on one server clock (they are server time based, see
// Lease.Token); across Cluster nodes that also depends on the nodes' clocks.
// ReplicaAck is supported only where an attempt is one script (not across
// Cluster slots). The names are checked by Acquire: at least one, each a
// valid name, no duplicates.
func (c *Client) MultiLock(names ...string) Locker {
	return &multiLock{c: c, names: slices.Sorted(slices.Values(names))}
}

// Name returns the member names in canonical order, joined by ",".
func (m *multiLock) Name() string { return strings.Join(m.names, ",") }

// Acquire takes every member or none; see Locker and Client.MultiLock.
func (m *multiLock) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return m.c.acquire(ctx, multiShape{m}, opts)
}

// oneSlot reports whether an attempt can be one script: not a Cluster, or
// every member key in one slot.
func (m *multiLock) oneSlot() bool {
	m.build()
	return m.single
}

func (m *multiLock) computeOneSlot() bool {
	if _, ok := m.c.rdb.(*redis.ClusterClient); !ok {
		return true
	}
	first := keySlot(m.c.keys(m.names[0]).lock)
	for _, n := range m.names[1:] {
		if keySlot(m.c.keys(n).lock) != first {
			return false
		}
	}
	return true
}

// memberKeys are the members' keys: each one a Lock's (lock, fence
// counter, queue, deadlines), in canonical order.
func (m *multiLock) memberKeys() []queueKeys {
	m.build()
	return m.ks
}

// build makes the members' keys once.
func (m *multiLock) build() {
	m.once.Do(func() {
		m.ks = make([]queueKeys, len(m.names))
		for i, n := range m.names {
			m.ks[i] = m.c.queueKeys(n)
			m.ks[i].box()
		}
		m.keys = keysOf(m.ks)
		m.single = m.computeOneSlot()
	})
}

// keysOf is the KEYS of a script over every member.
func keysOf(ks []queueKeys) []string {
	keys := make([]string, 0, 4*len(ks))
	for _, k := range ks {
		keys = append(keys, k.lock, k.fence, k.queue, k.timeouts)
	}
	return keys
}

type multiShape struct{ m *multiLock }

// spec: members that share a Cluster slot are taken by one script (which
// ReplicaAck may follow); others one by one in canonical order.
func (s multiShape) spec() *shapeSpec {
	sp := &shapeSpec{kind: "multi", name: s.m.Name(), wake: wakeShared, owned: true, check: s.validate}
	if len(s.m.names) == 0 {
		return sp
	}
	sp.keys = s.m.c.keys(s.m.names[0])
	if s.m.oneSlot() {
		sp.replicaAck, sp.refusedOn = true, s.refusedOn
	} else {
		sp.try = s.tryInOrder
	}
	return sp
}

// refusedOn is the wake channel of the member the one-script attempt found
// held (the reply's third element, 1-based).
func (s multiShape) refusedOn(reply []int64) string {
	i := 1
	if len(reply) > 2 {
		i = int(reply[2])
	}
	i = min(max(i, 1), len(s.m.names))
	return s.m.c.keys(s.m.names[i-1]).wake
}

func (s multiShape) validate() error {
	if len(s.m.names) == 0 {
		return fmt.Errorf("%w: a MultiLock needs at least one name", ErrInvalidArgument)
	}
	for i, n := range s.m.names {
		if err := seam.CheckName(n); err != nil {
			return err
		}
		if i > 0 && n == s.m.names[i-1] {
			return fmt.Errorf("%w: name %q appears twice in a MultiLock", ErrInvalidArgument, n)
		}
	}
	return nil
}

// acquireCall is the one-script attempt.
func (s multiShape) acquireCall(a *attempt) scriptCall {
	s.m.build()
	return multiAcquire.call(s.m.keys, a.owner, a.op, ms(a.ttl), a.meta, a.clockArg())
}

// tryInOrder takes the members one by one in canonical order; when one is
// held by another owner it gives back those it took and returns a refusal
// that waits on that member.
func (s multiShape) tryInOrder(ctx context.Context, a *attempt) (grant, error) {
	c, name := s.m.c, s.m.Name()
	ks := s.m.memberKeys()
	var took []int
	rollback := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		defer cancel()
		calls := make([]scriptCall, len(took))
		for j, i := range took {
			calls[j] = memberRelease(c, &ks[i], a.owner, ids.Op())
		}
		_, _ = c.scripts.runCalls(rctx, calls)
	}
	var fence int64
	for i := range ks {
		g, err := readGrant(c.call(ctx, memberAcquire(c, &ks[i], a)))
		if err != nil {
			rollback()
			return grant{}, redisErr(ctx, "acquire", "multi", name, err)
		}
		if !g.ok {
			rollback()
			g.wake = ks[i].wake
			return g, nil
		}
		took = append(took, i)
		fence = max(fence, g.fence)
	}
	return grant{ok: true, fence: fence}, nil
}

func (s multiShape) holdID(a *attempt) string {
	q := make([]string, len(s.m.names))
	for i, n := range s.m.names {
		q[i] = strconv.Quote(n)
	}
	return "multi|" + s.m.c.prefix + strings.Join(q, ",") + "|" + a.owner
}

func (s multiShape) ops(a *attempt) holdOps {
	return multiOps{m: s.m, owner: a.owner}
}

// memberAcquire is a's acquisition of one member, as a Lock's (the
// member's own waiters queue; this attempt only marks it waited for).
func memberAcquire(c *Client, k *queueKeys, a *attempt) scriptCall {
	return reentrantAcquire.call([]string{k.lock, k.fence, k.queue, k.timeouts},
		a.owner, a.op, ms(a.ttl), a.meta, a.clockArg(), -1, c.argClient, "0", k.wake, "", "0", c.argCheck)
}

// memberRelease releases one hold of owner on one member, as a Lock's.
func memberRelease(c *Client, k *queueKeys, owner, op string) scriptCall {
	return reentrantRelease.call([]string{k.lock, k.fence, k.queue, k.timeouts}, owner, op, k.wake, c.argCheck)
}

// multiOps drives a held MultiLock: one script when its keys share a slot,
// else one Lock script per member (pipelined).
type multiOps struct {
	m     *multiLock
	owner string
}

func (o multiOps) locks() []string {
	keys := make([]string, len(o.m.ks))
	for i, k := range o.m.ks {
		keys[i] = k.lock
	}
	return keys
}

func (o multiOps) renewCalls(ttl time.Duration) []scriptCall {
	if o.m.single {
		return []scriptCall{multiExtend.call(o.locks(), o.owner, ms(ttl))}
	}
	calls := make([]scriptCall, len(o.m.ks))
	for i, k := range o.m.ks {
		calls[i] = lockExtend.call([]string{k.lock}, o.owner, ms(ttl))
	}
	return calls
}

func (o multiOps) extend(ctx context.Context, ttl time.Duration) (bool, error) {
	ns, err := o.m.c.scripts.runCalls(ctx, o.renewCalls(ttl))
	if err != nil {
		return false, err
	}
	return !slices.Contains(ns, 0), nil
}

// releaseCalls undo one hold: one script when the keys share a slot, else
// one per member, all with one operation id.
func (o multiOps) releaseCalls() []scriptCall {
	op := ids.Op()
	if o.m.single {
		args := []any{o.owner, op, o.m.c.argCheck}
		for _, k := range o.m.ks {
			args = append(args, k.wake)
		}
		return []scriptCall{multiRelease.call(o.m.keys, args...)}
	}
	calls := make([]scriptCall, len(o.m.ks))
	for i := range o.m.ks {
		calls[i] = memberRelease(o.m.c, &o.m.ks[i], o.owner, op)
	}
	return calls
}

func (o multiOps) release(ctx context.Context) (seam.Released, error) {
	calls := o.releaseCalls()
	if o.m.single {
		n, err := o.m.c.callSettled(ctx, calls[0])
		return seam.Released(n), err
	}
	ns, err := o.m.c.scripts.runCalls(ctx, calls)
	switch {
	case err != nil:
		return releaseNotOurs, err
	case slices.Contains(ns, int64(releaseNotOurs)):
		return releaseNotOurs, nil
	case slices.Contains(ns, int64(releaseStillHeld)):
		return releaseStillHeld, nil
	}
	return releaseFree, nil
}

func (o multiOps) verify(ctx context.Context) (bool, error) {
	p := o.m.c.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(o.m.ks))
	for i, k := range o.m.ks {
		cmds[i] = p.HGet(ctx, k.lock, "o")
	}
	_, _ = p.Exec(ctx)
	for _, cmd := range cmds {
		v, err := cmd.Result()
		switch {
		case isNil(err):
			return false, nil
		case err != nil:
			return false, err
		case v != o.owner:
			return false, nil
		}
	}
	return true, nil
}
