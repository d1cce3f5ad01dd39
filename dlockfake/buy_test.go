package dlockfake_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockfake"
	"github.com/dlockgo/dlock/observe"
)

// The code under test: buy takes n units of a SKU under its lock, and
// must write nothing once the lock is lost.

// Lockers hands out locks by name: a *dlockfake.Client in the tests, an
// adapter of dlock.Client (or etcdlock's, zklock's) in production.
type Lockers interface {
	Lock(name string) dlock.Locker
}

var errSoldOut = errors.New("sold out")

// Stock is the storage buy writes; midway, when set, runs between its
// read and its write (where a real service pauses, or calls out).
type Stock struct {
	mu     sync.Mutex
	units  int
	token  int64 // of the last write
	midway func()
}

func buy(ctx context.Context, locks Lockers, s *Stock, n int) error {
	return dlock.Do(ctx, locks.Lock("stock:1001"), func(ctx context.Context, l *dlock.Lease) error {
		s.mu.Lock()
		left := s.units
		s.mu.Unlock()
		if left < n {
			return errSoldOut
		}
		if s.midway != nil {
			s.midway()
		}
		if err := l.Verify(ctx); err != nil { // check before commit
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.units, s.token = left-n, l.Token()
		return nil
	}, dlock.Wait(3*time.Second))
}

// The tests: each loss of the lock, injected midway, on a clock that
// moves only when the test says so.

func TestBuyWritesNothingOnceTheLockIsLost(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(svc *dlockfake.Service) error
	}{
		{"lost", func(svc *dlockfake.Service) error { return svc.Lose("stock:1001", observe.LostUnreachable) }},
		{"taken behind its back", func(svc *dlockfake.Service) error {
			_, err := svc.Take("stock:1001") // never released: the test ends
			return err
		}},
		{"renewals failed", func(svc *dlockfake.Service) error {
			err := svc.FailRenewals("stock:1001", 2)
			svc.Advance(time.Minute) // the lease runs out on the holder's clock
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := dlockfake.New()
			locks, err := svc.NewClient()
			if err != nil {
				t.Fatal(err)
			}
			defer locks.Close()
			s := &Stock{units: 10, midway: func() {
				if err := tc.fault(svc); err != nil {
					t.Error(err)
				}
			}}
			err = buy(context.Background(), locks, s, 3)
			if !errors.Is(err, dlock.ErrLockLost) {
				t.Fatalf("buy: %v, want ErrLockLost", err)
			}
			if s.units != 10 {
				t.Fatalf("%d units left: buy wrote under a lost lock", s.units)
			}
		})
	}
}

func TestBuyIsBusyWhileAnotherProcessHoldsTheLock(t *testing.T) {
	svc := dlockfake.New()
	locks, err := svc.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	release, err := svc.Take("stock:1001") // another process holds it
	if err != nil {
		t.Fatal(err)
	}
	s := &Stock{units: 10}
	done := make(chan error, 1)
	go func() { done <- buy(context.Background(), locks, s, 3) }()
	if err := svc.AwaitWaiters(context.Background(), "stock:1001", 1); err != nil {
		t.Fatal(err)
	}
	svc.Advance(3 * time.Second) // buy's Wait runs out
	if err := <-done; !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("buy: %v, want ErrNotAcquired", err)
	}
	release()
	if err := buy(context.Background(), locks, s, 3); err != nil {
		t.Fatal(err)
	}
	// The write carries the token of the lease it was made under.
	for _, e := range svc.Record() {
		if e.Op == dlockfake.Acquire && e.Err == nil && e.Token != s.token {
			t.Fatalf("wrote with token %d, granted %d", s.token, e.Token)
		}
	}
}
