package zklock

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/internal/peerlink"
	"github.com/dlockgo/dlock/observe"
	"github.com/go-zookeeper/zk"
)

// TestConformance runs the backend suite shared with Redis and etcd against
// one ZooKeeper server.
func TestConformance(t *testing.T) {
	admin := dial(t, 3*time.Second)
	dlocktest.Run(t, dlocktest.Backend{
		Renewal: 3 * time.Second,
		Lease:   time.Second,
		NewClient: func(t testing.TB) dlocktest.Client {
			return conformanceClient(dial(t, 3*time.Second))
		},
		NewObservedClient: func(t testing.TB, o observe.Observer) dlocktest.Client {
			return conformanceClient(dial(t, 3*time.Second, Config{Observer: o}))
		},
		Told: time.Second,
		// The cut-off client's session (10 s) outlives the suite's use of it.
		NewCutClient: func(t testing.TB) (dlocktest.Client, func()) {
			p, err := peerlink.NewProxy(server.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			return conformanceClient(dialAddr(t, p.Addr(), 10*time.Second)), p.Cut
		},
		// Tamper deletes the first node in line, as zkCli's delete would.
		Tamper: func(ctx context.Context, name string) error {
			dir := admin.dir("lock", name)
			children, _, err := admin.conn.Children(dir)
			if err != nil {
				return err
			}
			q := queue(children)
			if len(q) == 0 {
				return fmt.Errorf("%s has no holder", dir)
			}
			return admin.conn.Delete(dir+"/"+q[0].name, -1)
		},
		Steal: func(t testing.TB, name string) {
			admin := dial(t, 2*time.Second)
			dir := admin.dir("lock", name)
			children, _, err := admin.conn.Children(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range children {
				if err := admin.conn.Delete(dir+"/"+ch, -1); err != nil && err != zk.ErrNoNode {
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
