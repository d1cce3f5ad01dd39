package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/redis/go-redis/v9"
)

// 64 goroutines × 200 acquisitions on one name: no overlap, and fencing tokens
// strictly increase in grant order.
func TestMutualExclusion(t *testing.T) {
	rdb := server(t)
	for _, shape := range []string{"mutex", "lock"} {
		t.Run(shape, func(t *testing.T) {
			c := newClient(t, rdb)
			const workers, rounds = 64, 200
			var w witness.Witness
			var mu sync.Mutex
			var last int64
			var badOrder int
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for i := 0; i < workers; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lk := lockers(c, "hot")[shape]
					for r := 0; r < rounds; r++ {
						ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
						l, err := lk.Acquire(ctx)
						cancel()
						if err != nil {
							errs <- err
							return
						}
						w.Enter("hot")
						mu.Lock()
						if l.Token() <= last {
							badOrder++
						}
						last = l.Token()
						mu.Unlock()
						w.Exit("hot")
						if err := l.Unlock(context.Background()); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if got := w.Entries(); got != workers*rounds {
				t.Fatalf("entries = %d, want %d", got, workers*rounds)
			}
			if n := w.Overlaps(); n != 0 {
				t.Fatalf("%d overlaps", n)
			}
			if badOrder != 0 {
				t.Fatalf("%d tokens not greater than the previous grant's", badOrder)
			}
			if n, _ := rdb.Exists(context.Background(), "dlock:{hot}").Result(); n != 0 {
				t.Fatalf("lock key left behind")
			}
		})
	}
}

// A Mutex is not reentrant: the same owner waits like anyone else.
func TestMutexNotReentrant(t *testing.T) {
	c := newClient(t, server(t))
	ctx := context.Background()
	l, err := c.Mutex("m").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	_, err = c.Mutex("m").Acquire(l.Context(), dlock.Wait(50*time.Millisecond))
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second acquire by the same owner: %v, want ErrNotAcquired", err)
	}
}

func TestReentrancy(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	other := newClient(t, rdb)
	ctx := context.Background()
	outer, err := c.Lock("r").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := c.Lock("r").Acquire(outer.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("re-entry through the lease's context: %v", err)
	}
	if inner.Token() != outer.Token() {
		t.Fatalf("re-entry token %d, want the holder's %d", inner.Token(), outer.Token())
	}
	info, err := c.Inspect(ctx, "r")
	if err != nil || info.Holders[0].Count != 2 {
		t.Fatalf("inspect: %+v %v, want count 2", info, err)
	}
	// A fresh context is another owner.
	if _, err := c.Lock("r").Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("fresh context acquired a held lock: %v", err)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Lock("r").Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another owner acquired after one of two unlocks: %v", err)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := outer.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("third unlock: %v, want ErrNotHeld", err)
	}
	l, err := other.Lock("r").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("another owner after both unlocks: %v", err)
	}
	if l.Token() <= outer.Token() {
		t.Fatalf("next holder's token %d not above %d", l.Token(), outer.Token())
	}
	_ = l.Unlock(ctx)
}

// Release wakes a waiter through pub/sub, long before the 30 s lease would.
func TestWaiterWokenByRelease(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	for _, shape := range []string{"mutex", "lock"} {
		name := "wake-" + shape
		la, err := lockers(a, name)[shape].Acquire(ctx, dlock.LeaseTime(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			lb, err := lockers(b, name)[shape].Acquire(ctx, dlock.Wait(10*time.Second))
			if err != nil {
				t.Error(err)
				got <- time.Time{}
				return
			}
			got <- time.Now()
			_ = lb.Unlock(ctx)
		}()
		waitForSubscriber(t, rdb, "dlock:{"+name+"}:wake")
		released := time.Now()
		if err := la.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		at := <-got
		if d := at.Sub(released); d < 0 || d > 500*time.Millisecond {
			t.Fatalf("%s: waiter acquired %v after the release", shape, d)
		}
	}
}

// waitForSubscriber waits (bounded) until someone subscribes to channel or
// to a Client's own channel of it (channel:<client id>, where queued waiters
// listen).
func waitForSubscriber(t *testing.T, rdb *redis.Client, channel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if chans, _ := rdb.PubSubChannels(context.Background(), channel+"*").Result(); len(chans) > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("nobody subscribed to %s within 5s", channel)
}

func TestWaitBounds(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	l, err := a.Lock("busy").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)

	start := time.Now()
	_, err = b.Lock("busy").Acquire(ctx, dlock.Wait(300*time.Millisecond))
	if el := time.Since(start); !errors.Is(err, dlock.ErrNotAcquired) || el > 400*time.Millisecond || el < 300*time.Millisecond {
		t.Fatalf("Wait(300ms): %v after %v", err, el)
	}

	start = time.Now()
	_, err = b.Lock("busy").Acquire(ctx, dlock.Wait(0))
	if !errors.Is(err, dlock.ErrNotAcquired) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("Wait(0): %v after %v", err, time.Since(start))
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	start = time.Now()
	_, err = b.Lock("busy").Acquire(cctx)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 300*time.Millisecond {
		t.Fatalf("cancelled: %v after %v", err, time.Since(start))
	}
	if errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("cancelled acquire also reports ErrNotAcquired: %v", err)
	}
}

// A waiter retries as soon as the holder's lease has run out: a refusal
// that reports under 1 ms left (PTTL 0) must not be waited out like a key
// with no TTL.
func TestWaiterRetriesAtExpiry(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	const lease = 100 * time.Millisecond
	for i := 0; i < 30; i++ {
		name := "expiry-" + fmt.Sprint(i)
		start := time.Now()
		if _, err := a.Mutex(name).Acquire(ctx, dlock.LeaseTime(lease)); err != nil {
			t.Fatal(err)
		}
		lb, err := b.Mutex(name).Acquire(ctx, dlock.Wait(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el > lease+400*time.Millisecond {
			t.Fatalf("round %d: the waiter got the expired lock after %v (lease %v)", i, el, lease)
		}
		_ = lb.Unlock(ctx)
	}
}
