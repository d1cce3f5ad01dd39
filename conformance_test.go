package dlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlocktest"
)

// TestConformance runs the suite every backend passes against Redis, with
// Lock as the reentrant shape; FairLock runs it again in the Lock's place.
func TestConformance(t *testing.T) {
	rdb := server(t)
	for _, fair := range []bool{false, true} {
		t.Run(map[bool]string{false: "Lock", true: "FairLock"}[fair], func(t *testing.T) {
			dlocktest.Run(t, dlocktest.Backend{
				NewClient: func(t testing.TB) dlocktest.Client {
					c := newClient(t, rdb, dlock.Config{WatchdogTimeout: 600 * time.Millisecond})
					lock := func(n string) dlock.Locker { return c.Lock(n) }
					if fair {
						lock = func(n string) dlock.Locker { return c.FairLock(n) }
					}
					return dlocktest.Client{
						Mutex:     func(n string) dlock.Locker { return c.Mutex(n) },
						Lock:      lock,
						Read:      func(n string) dlock.Locker { return c.RWLock(n).ReadLock() },
						Write:     func(n string) dlock.Locker { return c.RWLock(n).WriteLock() },
						Semaphore: func(n string, permits int) dlock.Locker { return c.Semaphore(n, permits) },
						Close:     c.Close,
					}
				},
				Renewal: 600 * time.Millisecond,
				Lease:   300 * time.Millisecond,
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
