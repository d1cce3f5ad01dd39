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
	sh   shape
}

// Mutex returns the Mutex called name. The name is checked by Acquire.
func (c *Client) Mutex(name string) *Mutex {
	return &Mutex{c: c, name: name, sh: c.exclusive("mutex", name, nil)}
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Acquire takes the mutex; see dlock.Locker. Uncontended, it costs one
// write to etcd (and Unlock one more).
func (m *Mutex) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	return m.c.acquire(ctx, m.sh, opts)
}

// exclusive is the shape of a Mutex or a Lock: one holder, the oldest key.
func (c *Client) exclusive(kind, name string, hold func(owner string) string) shape {
	dir := c.dir(kind, name)
	return shape{
		kind: kind, name: name, dirs: []string{dir}, hold: hold,
		// The two newest keys: ours, and the one in front of it.
		first: []clientv3.Op{clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2), clientv3.WithKeysOnly())},
		later: func(rev int64) []clientv3.Op {
			return []clientv3.Op{clientv3.OpGet(dir, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1), clientv3.WithKeysOnly())...)}
		},
		blocker: func(resps []*etcdserverpb.ResponseOp, rev int64) (string, bool) { return ahead(resps[0], rev), false },
	}
}

// holdKey returns the Keeper key of owner's hold of the reentrant shape
// kind on name.
func holdKey(kind, name, owner string) string { return kind + "\x00" + name + "\x00" + owner }
