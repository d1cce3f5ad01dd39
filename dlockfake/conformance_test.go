package dlockfake_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockfake"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/observe"
)

// TestConformance runs the suite every backend passes on a Service whose
// clock follows the real one (the suite waits in real time).
func TestConformance(t *testing.T) {
	svc := dlockfake.NewRealTime()
	client := func(t testing.TB, cfg dlockfake.Config) (*dlockfake.Client, dlocktest.Client) {
		c, err := svc.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, dlocktest.Client{
			Mutex:     c.Mutex,
			Lock:      c.Lock,
			Read:      func(n string) dlock.Locker { return c.RWLock(n).ReadLock() },
			Write:     func(n string) dlock.Locker { return c.RWLock(n).WriteLock() },
			Semaphore: func(n string, permits int) dlocktest.Semaphore { return c.Semaphore(n, permits) },
			MultiLock: c.MultiLock,
			Inspect:   c.Inspect,
			Close:     c.Close,
		}
	}
	dlocktest.Run(t, dlocktest.Backend{
		NewClient: func(t testing.TB) dlocktest.Client {
			_, c := client(t, dlockfake.Config{TTL: 600 * time.Millisecond})
			return c
		},
		NewObservedClient: func(t testing.TB, o observe.Observer) dlocktest.Client {
			_, c := client(t, dlockfake.Config{TTL: 600 * time.Millisecond, Observer: o})
			return c
		},
		Renewal: 600 * time.Millisecond,
		Lease:   300 * time.Millisecond,
		// A waiter refreshes its place every QueueTimeout/3; a paused
		// Client's waiters do not.
		QueueTimeout: time.Second,
		NewCutClient: func(t testing.TB) (dlocktest.Client, func()) {
			c, dc := client(t, dlockfake.Config{TTL: 10 * time.Second})
			return dc, c.Pause
		},
		// Tamper takes the lock from its holder and frees it: the holder's
		// next renewal (every 600ms/3) finds it gone.
		Tamper: func(_ context.Context, name string) error {
			release, err := svc.Take(name)
			if err == nil {
				release()
			}
			return err
		},
		Told: 200 * time.Millisecond,
		Steal: func(t testing.TB, name string) {
			release, err := svc.Take(name)
			if err != nil {
				t.Fatal(err)
			}
			release()
		},
	})
}
