package etcdlock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Semaphore lets up to a number of holders in at once, in arrival order: a
// permit goes to a key when fewer than the permit count of keys are older
// than it. Every permit is a Lease of its own, with its own key, token and
// loss signal. Waiters are woken by every release of the semaphore (not
// one at a time, as lock waiters are) and by every change of its count.
//
// The permit count lives in etcd, in a key of its own next to the
// semaphore's directory (see keys.go), as on Redis: the first Acquire that
// finds none sets it to its Semaphore's count, and every acquiring
// transaction compares it, so a permit is never granted under another
// count. An Acquire whose Semaphore has another count fails with an error
// wrapping dlock.ErrInvalidArgument (the stored count in the message) and
// writes nothing; a waiter that finds the count changed while it waits
// fails the same way, unless the change was its own Semaphore's
// SetPermits. SetPermits changes the count for every user. The count key
// has no lease: it stays in etcd after the last permit is released
// (etcdctl del removes it; the next Acquire sets it again).
type Semaphore struct {
	c       *Client
	name    string
	permits *seam.Permits
}

// Semaphore returns the semaphore called name with the given number of
// permits. The name and count are checked by Acquire.
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	return &Semaphore{c: c, name: name, permits: seam.NewPermits(permits)}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// SetPermits sets the semaphore's permit count in etcd to n (at least 1),
// for every user of its name, and makes this Semaphore count against n.
// Permits held beyond a lowered count stay held until they are released;
// waiters look again, as more permits may fit (a waiter whose Semaphore
// has another count than n fails with dlock.ErrInvalidArgument).
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	if err := seam.CheckContext(ctx); err != nil {
		return seam.Wrap("set permits", "semaphore", s.name, err)
	}
	if err := seam.CheckName(s.name); err != nil {
		return seam.Wrap("set permits", "semaphore", s.name, err)
	}
	if n < 1 {
		return seam.Wrap("set permits", "semaphore", s.name, fmt.Errorf("%w: %d permits (want at least 1)", dlock.ErrInvalidArgument, n))
	}
	if s.c.isClosed() {
		return seam.Wrap("set permits", "semaphore", s.name, dlock.ErrClosed)
	}
	err := s.permits.Set(n, func() error {
		_, err := s.c.cli.Put(ctx, s.c.permitsKey(s.name), strconv.Itoa(n))
		return err
	})
	if err != nil {
		return seam.StoreErr(ctx, "set permits", "semaphore", s.name, err)
	}
	return nil
}

// Acquire takes one permit; see dlock.Locker. It returns an error wrapping
// dlock.ErrInvalidArgument if the semaphore has fewer than 1 permit, or if
// etcd keeps another count for its name.
func (s *Semaphore) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	dir, countKey := s.c.dir("semaphore", s.name), s.c.permitsKey(s.name)
	want := s.permits.Count() // the count of this acquisition, as etcd keeps it
	readCount := clientv3.OpGet(countKey)
	older := func(r *etcdserverpb.ResponseOp, rev int64) int {
		k := 0
		for _, kv := range r.GetResponseRange().GetKvs() {
			if kv.CreateRevision < rev {
				k++
			}
		}
		return k
	}
	return s.c.acquire(ctx, shape{
		kind: "semaphore", name: s.name, dirs: []string{dir}, permits: want,
		check: func() error {
			if err := seam.CheckName(s.name); err != nil {
				return err
			}
			if want < 1 {
				return fmt.Errorf("%w: %d permits (want at least 1)", dlock.ErrInvalidArgument, want)
			}
			return nil
		},
		first: []clientv3.Op{clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithKeysOnly()), readCount},
		later: func(rev int64) []clientv3.Op {
			return []clientv3.Op{clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(rev-1)), readCount}
		},
		guard: func() ([]clientv3.Cmp, []clientv3.Op) {
			return []clientv3.Cmp{clientv3.Compare(clientv3.Value(countKey), "=", strconv.Itoa(want))}, []clientv3.Op{readCount}
		},
		failed: func(ctx context.Context, resps []*etcdserverpb.ResponseOp) (bool, error) {
			n, raw, ok := storedCount(resps[0])
			switch {
			case !ok: // no count yet: set ours if there still is none, and queue again
				_, err := s.c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(countKey), "=", 0)).
					Then(clientv3.OpPut(countKey, strconv.Itoa(want))).Commit()
				return false, err
			case n == want:
				return true, nil
			case s.permits.Accepts(n): // our own SetPermits changed it
				want = n
				return false, nil
			}
			return false, seam.PermitsMismatch(raw, want)
		},
		recheck: func(resps []*etcdserverpb.ResponseOp) error {
			n, raw, ok := storedCount(resps[1])
			switch {
			case !ok: // deleted from outside: the next Acquire sets it again
				return nil
			case !s.permits.Accepts(n):
				return seam.PermitsMismatch(raw, want)
			}
			want = n
			return nil
		},
		wake: countKey,
		blocker: func(resps []*etcdserverpb.ResponseOp, rev int64) (string, bool) {
			if older(resps[0], rev) < want {
				return "", false
			}
			return dir, true
		},
		// A permit whose key vanished without a release is still in use
		// until its orphan mark goes (lockdelay.go).
		orphan: func(keys, marks []*etcdserverpb.ResponseOp, rev int64) (string, bool) {
			live := make(map[string]int64)
			for _, kv := range keys[0].GetResponseRange().GetKvs() {
				live[s.c.markOf(string(kv.Key))] = kv.CreateRevision
			}
			n := older(keys[0], rev)
			for _, kv := range marks[0].GetResponseRange().GetKvs() {
				if kv.CreateRevision < rev && live[string(kv.Key)] != kv.CreateRevision {
					n++
				}
			}
			if n < want {
				return "", false
			}
			return s.c.markOf(dir), true
		},
	}, opts)
}

// storedCount reads a semaphore's count from the response of a get of its
// count key: ok is false when there is none; raw is the value as stored
// (n is 0 if it is not a number).
func storedCount(r *etcdserverpb.ResponseOp) (n int, raw string, ok bool) {
	var kv *mvccpb.KeyValue
	if kvs := r.GetResponseRange().GetKvs(); len(kvs) > 0 {
		kv = kvs[0]
	}
	return countOf(kv)
}

// countOf reads a semaphore's count from its count key kv (nil: none), as
// storedCount does.
func countOf(kv *mvccpb.KeyValue) (n int, raw string, ok bool) {
	if kv == nil {
		return 0, "", false
	}
	raw = string(kv.Value)
	n, _ = strconv.Atoi(raw)
	return n, raw, true
}
