package etcdlock

import (
	"context"
	"fmt"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Semaphore lets up to a fixed number of holders in at once, in arrival
// order: a permit goes to a key when fewer than Permits keys are older
// than it. Every permit is a Lease of its own, with its own key, token and
// loss signal. The count is not stored in etcd: every user of one name
// must agree on it. Waiters are woken by every release of the semaphore
// (not one at a time, as lock waiters are).
type Semaphore struct {
	c       *Client
	name    string
	permits int
}

// Semaphore returns the semaphore called name with the given number of
// permits. The name and count are checked by Acquire.
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	return &Semaphore{c: c, name: name, permits: permits}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Acquire takes one permit; see dlock.Locker. It returns an error wrapping
// dlock.ErrInvalidArgument if the semaphore has fewer than 1 permit.
func (s *Semaphore) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	dir := s.c.dir("semaphore", s.name)
	n := s.permits
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
		kind: "semaphore", name: s.name, dirs: []string{dir}, permits: n,
		check: func() error {
			if err := seam.CheckName(s.name); err != nil {
				return err
			}
			if n < 1 {
				return fmt.Errorf("%w: %d permits (want at least 1)", dlock.ErrInvalidArgument, n)
			}
			return nil
		},
		first: []clientv3.Op{clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())},
		later: func(rev int64) []clientv3.Op {
			return []clientv3.Op{clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(rev-1))}
		},
		blocker: func(resps []*etcdserverpb.ResponseOp, rev int64) (string, bool) {
			if older(resps[0], rev) < n {
				return "", false
			}
			return dir, true
		},
	}, opts)
}
