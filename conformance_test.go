package dlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/internal/peerlink"
	"github.com/dlockgo/dlock/observe"
	"github.com/redis/go-redis/v9"
)

// TestConformance runs the suite every backend passes against Redis, with
// Lock as the reentrant shape; FairLock runs it again in the Lock's place.
func TestConformance(t *testing.T) {
	rdb := server(t)
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "Lock", true: "FairLock"}[fair], func(t *testing.T) {
			client := func(c *dlock.Client) dlocktest.Client {
				lock := func(n string) dlock.Locker { return c.Lock(n) }
				if fair {
					lock = func(n string) dlock.Locker { return c.FairLock(n) }
				}
				return dlocktest.Client{
					Mutex:     func(n string) dlock.Locker { return c.Mutex(n) },
					Lock:      lock,
					Read:      func(n string) dlock.Locker { return c.RWLock(n).ReadLock() },
					Write:     func(n string) dlock.Locker { return c.RWLock(n).WriteLock() },
					Semaphore: func(n string, permits int) dlocktest.Semaphore { return c.Semaphore(n, permits) },
					MultiLock: func(names ...string) dlock.Locker { return c.MultiLock(names...) },
					Inspect:   c.Inspect,
					List:      c.List,
					Close:     c.Close,
				}
			}
			dlocktest.Run(t, dlocktest.Backend{
				NewClient: func(t testing.TB) dlocktest.Client {
					return client(newClient(t, rdb, dlock.Config{TTL: 600 * time.Millisecond}))
				},
				NewObservedClient: func(t testing.TB, o observe.Observer) dlocktest.Client {
					return client(newClient(t, rdb, dlock.Config{TTL: 600 * time.Millisecond, Observer: o}))
				},
				Renewal: 600 * time.Millisecond,
				Lease:   300 * time.Millisecond,
				// A waiter refreshes its place every QueueTimeout/3.
				QueueTimeout: time.Second,
				// The cut-off client's watchdog keeps its leases for 10 s,
				// well past the QueueTimeout; its requests time out with
				// their ctx once cut.
				NewCutClient: func(t testing.TB) (dlocktest.Client, func()) {
					p, err := peerlink.NewProxy(rdb.Options().Addr)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { p.Close() })
					cut := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
					t.Cleanup(func() { cut.Close() })
					return client(newClient(t, cut, dlock.Config{TTL: 10 * time.Second})), p.Cut
				},
				// Tamper is redis-cli DEL of the lock's key; the watchdog's
				// next renewal (every 600ms/3) finds it gone.
				Tamper: func(ctx context.Context, name string) error {
					return rdb.Del(ctx, dlock.DefaultPrefix+"{"+name+"}").Err()
				},
				Told: 200 * time.Millisecond,
				Steal: func(t testing.TB, name string) {
					c := newClient(t, rdb)
					if _, err := c.ForceUnlock(context.Background(), name); err != nil {
						t.Fatalf("ForceUnlock: %v", err)
					}
				},
			})
		})
	}
}
