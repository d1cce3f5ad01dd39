package etcdlock

import (
	"context"
	"fmt"
	"time"

	"github.com/dlockgo/dlock"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// RWLock is a read-write lock: any number of readers share it, a writer
// holds it alone. Readers and writers queue together in arrival order: a
// reader waits only for older writers, a writer for every older key, so a
// waiting writer holds back the readers that come after it (no writer
// starves).
//
//   - Both sides are reentrant through the Lease's Context, like Lock.
//   - The writer may also take the read side (downgrade: take the read
//     lock, then unlock the write lock; no writer gets in between). The
//     reverse, read to write, is refused at once with dlock.ErrUpgrade.
//
// Every acquisition's token is its key's create revision: a writer's token
// is above every token granted before it.
type RWLock struct {
	c    *Client
	name string
}

// RWLock returns the read-write lock called name. The name is checked by
// Acquire.
func (c *Client) RWLock(name string) *RWLock { return &RWLock{c: c, name: name} }

// Name returns the lock's name.
func (rw *RWLock) Name() string { return rw.name }

// ReadLock returns the read side: its Acquire takes a shared hold.
func (rw *RWLock) ReadLock() dlock.Locker {
	c, name := rw.c, rw.name
	base := c.dir("rw", name)
	writers := base + "w/"
	return &side{name: name, c: c, sh: shape{
		kind: "rw_read", name: name, dirs: []string{base + "r/"}, area: []string{base},
		hold: func(owner string) string { return holdKey("rw_read", name, owner) },
		down: base + "d/",
		// No writer: granted; else the newest writer.
		first: []clientv3.Op{clientv3.OpGet(writers, append(clientv3.WithLastCreate(), clientv3.WithKeysOnly())...)},
		later: func(rev int64) []clientv3.Op {
			return []clientv3.Op{clientv3.OpGet(writers, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1), clientv3.WithKeysOnly())...)}
		},
		blocker: func(resps []*etcdserverpb.ResponseOp, rev int64) (string, bool) { return ahead(resps[0], rev), false },
	}}
}

// WriteLock returns the write side: its Acquire takes the exclusive hold.
func (rw *RWLock) WriteLock() dlock.Locker {
	c, name := rw.c, rw.name
	base := c.dir("rw", name)
	down := clientv3.OpGet(base+"d/", clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
	return &side{name: name, c: c, sh: shape{
		kind: "rw_write", name: name, dirs: []string{base + "w/"}, area: []string{base},
		hold: func(owner string) string { return holdKey("rw_write", name, owner) },
		refuse: func(a *attempt) error {
			if a.carried() && a.c.held(holdKey("rw_read", name, a.owner)) != nil {
				return fmt.Errorf("%w (unlock the read side first)", dlock.ErrUpgrade)
			}
			return nil
		},
		first: []clientv3.Op{clientv3.OpGet(base, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2), clientv3.WithKeysOnly()), down},
		later: func(rev int64) []clientv3.Op {
			return []clientv3.Op{clientv3.OpGet(base, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1), clientv3.WithKeysOnly())...), down}
		},
		blocker: func(resps []*etcdserverpb.ResponseOp, rev int64) (string, bool) {
			if k := ahead(resps[0], rev); k != "" {
				return k, false
			}
			if kvs := resps[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
				return string(kvs[0].Key), false
			}
			return "", false
		},
	}}
}

// Keys under the lock's directory: r/ readers, w/ writers, d/ readers that
// took the read side while holding the write side (downgrades), which the
// writers after them wait for whatever their age.

// side is one side of an RWLock.
type side struct {
	name string
	c    *Client
	sh   shape
}

func (s *side) Name() string { return s.name }

// Acquire takes or re-enters the side; see RWLock.
func (s *side) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	return s.c.acquire(ctx, s.sh, opts)
}

// downgrade puts the read side's key of an owner that holds the write
// side under the shape's down directory (d/), written only while the
// owner's write key still exists (so a writer that finds the write key
// gone finds this one): a place granted at once. nil, nil: the owner holds
// no write side, or lost it meanwhile (queue as a reader).
func (a *attempt) downgrade(ctx context.Context) (*place, error) {
	if !a.carried() {
		return nil, nil // a new owner holds nothing
	}
	w := a.c.held(holdKey("rw_write", a.sh.name, a.owner))
	if w == nil {
		return nil, nil
	}
	s, err := a.c.session(ctx)
	if err != nil {
		return nil, err
	}
	a.slot = a.c.slots.take()
	key := holderKey(a.sh.down, s, a.slot)
	put := clientv3.OpPut(key, a.c.value(a.owner, 0, false, time.Now()), clientv3.WithLease(s.id))
	puts := append([]clientv3.Op{put}, a.c.markPuts([]string{key}, a.markValue(s.keep))...)
	resp, err := a.c.cli.Txn(ctx).If(w.Ops().owned()...).Then(puts...).Commit()
	switch {
	case err != nil && a.c.sessionGone(s, err):
		err = nil
		fallthrough
	case err == nil && !resp.Succeeded: // nothing was written
		a.c.slots.give(a.slot)
		a.slot = -1
		return nil, err
	case err != nil:
		a.c.deleteLater([]string{key}, 0, a.slot)
		a.slot = -1
		return nil, err
	}
	r := resp.Header.Revision
	return &place{s: s, keys: []string{key}, rev: r, id: a.owner, at: r, looked: true}, nil
}
