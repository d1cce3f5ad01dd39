package etcdlock

import (
	"context"

	"github.com/dlockgo/dlock"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Mutex is an exclusive lock granted in arrival order. It is not
// reentrant: acquiring it again with the holder's context waits like anyone
// else (use Lock for reentrancy).
type Mutex struct {
	c    *Client
	name string
}

// Mutex returns the Mutex called name. The name is checked by Acquire.
func (c *Client) Mutex(name string) *Mutex { return &Mutex{c: c, name: name} }

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Acquire takes the mutex; see dlock.Locker. Uncontended, it costs one
// write to etcd (and Unlock one more).
func (m *Mutex) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	return m.c.acquire(ctx, m.c.exclusive("mutex", m.name, false), opts)
}

// exclusive is the shape of a Mutex or a Lock: one holder, the oldest key.
func (c *Client) exclusive(kind, name string, reentrant bool) shape {
	dir := c.dir(kind, name)
	return shape{
		kind: kind, name: name, dir: dir, reentrant: reentrant,
		// The two newest keys: ours, and the one in front of it.
		first: []clientv3.Op{clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2))},
		later: func(rev int64) []clientv3.Op {
			return []clientv3.Op{clientv3.OpGet(dir, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1))...)}
		},
		blocker: func(resps []*etcdserverpb.ResponseOp, rev int64) (string, bool) { return ahead(resps[0], rev), false },
	}
}
