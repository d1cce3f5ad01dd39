package etcdlock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/internal/etcdproc"
	"github.com/dlockgo/dlock/observe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestConformance runs the suite every dlock backend passes against one
// real etcd member.
func TestConformance(t *testing.T) {
	admin := etcdClient(t)
	dlocktest.Run(t, dlocktest.Backend{
		NewClient: func(t testing.TB) dlocktest.Client {
			return conformanceClient(newClient(t, Config{TTL: 2 * time.Second}))
		},
		NewObservedClient: func(t testing.TB, o observe.Observer) dlocktest.Client {
			return conformanceClient(newClient(t, Config{TTL: 2 * time.Second, Observer: o}))
		},
		// A waiting key moves to a lease of its own of QueueTimeout (1 s,
		// etcd's shortest with FastElection) when that is shorter than the
		// session's TTL (2 s here, 10 s for the cut-off client).
		QueueTimeout: time.Second,
		NewCutClient: func(t testing.TB) (dlocktest.Client, func()) {
			p, err := etcdproc.NewProxy(server.Members[0].ClientAddr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			return conformanceClient(newClientOn(t, etcdClient(t, p.Endpoint()), Config{TTL: 10 * time.Second})), p.Cut
		},
		Renewal: 2 * time.Second,
		Lease:   1500 * time.Millisecond,
		// Tamper is etcdctl del of the oldest key of the lock (its
		// holder's); the next keepalive (every TTL/3) finds it gone.
		Tamper: func(ctx context.Context, name string) error {
			c := &Client{prefix: DefaultPrefix}
			for _, kind := range []string{"mutex", "lock", "rw", "semaphore"} {
				resp, err := admin.Get(ctx, c.dir(kind, name), clientv3.WithPrefix(), clientv3.WithKeysOnly(),
					clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
				if err != nil {
					return err
				}
				if len(resp.Kvs) == 1 {
					_, err := admin.Delete(ctx, string(resp.Kvs[0].Key))
					return err
				}
			}
			return fmt.Errorf("no holder of %q", name)
		},
		Told:      2 * time.Second,
		LockDelay: true,
		Steal: func(t testing.TB, name string) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c := &Client{prefix: DefaultPrefix}
			for _, kind := range []string{"mutex", "lock", "rw", "semaphore"} {
				if _, err := admin.Delete(ctx, c.dir(kind, name), clientv3.WithPrefix()); err != nil {
					t.Fatal(err)
				}
			}
		},
	})
}

// conformanceClient is c as the suite sees it.
func conformanceClient(c *Client) dlocktest.Client {
	return dlocktest.Client{
		Mutex:     func(name string) dlock.Locker { return c.Mutex(name) },
		Lock:      func(name string) dlock.Locker { return c.Lock(name) },
		Read:      func(name string) dlock.Locker { return c.RWLock(name).ReadLock() },
		Write:     func(name string) dlock.Locker { return c.RWLock(name).WriteLock() },
		Semaphore: func(name string, permits int) dlocktest.Semaphore { return c.Semaphore(name, permits) },
		MultiLock: func(names ...string) dlock.Locker { return c.MultiLock(names...) },
		Inspect:   c.Inspect,
		List:      c.List,
		Close:     c.Close,
	}
}
