package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/internal/witness"
)

// 10 permits, 50 goroutines on 5 Clients: never more than 10 inside.
func TestSemaphoreLimit(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	cs := newClients(t, srv.Addr(), 5)
	ctx := context.Background()
	var w witness.Witness
	var mu sync.Mutex
	most := 0
	var wg sync.WaitGroup
	for g := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem := cs[g%5].Semaphore("pool", 10)
			for range 10 {
				l, err := sem.Acquire(ctx, dlock.Wait(30*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				n := w.EnterShared("pool")
				mu.Lock()
				most = max(most, n)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				w.ExitShared("pool")
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d entries, at most %d inside at once", w.Entries(), most)
	if w.Entries() != 500 {
		t.Fatalf("%d entries, want 500", w.Entries())
	}
	if most > 10 {
		t.Fatalf("%d holders inside at once, want <= 10", most)
	}
	if n, _ := rdb.Exists(ctx, "dlock:{pool}", "dlock:{pool}:permits").Result(); n != 0 {
		t.Fatalf("%d semaphore keys left", n)
	}
}

// A holder process killed while holding the only permit: the permit returns
// once its lease has run out.
func TestSemaphoreKilledHolder(t *testing.T) {
	const lease = 600 * time.Millisecond
	srv := redistest.Start(t)
	c := newClients(t, srv.Addr(), 1)[0]
	ctx := context.Background()
	child := startHelper(t, "sem-hold", srv.Addr(), "one", lease)
	child.waitLine(t, "acquired")
	if _, err := c.Semaphore("one", 1).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("permit taken by the child: %v", err)
	}
	child.kill(t)
	killed := time.Now()
	l, err := c.Semaphore("one", 1).Acquire(ctx, dlock.Wait(10*time.Second))
	if err != nil {
		t.Fatalf("permit of the killed holder: %v", err)
	}
	took := time.Since(killed)
	t.Logf("permit back %v after the kill", took)
	if took > lease+time.Second {
		t.Fatalf("permit back after %v, want about one lease (%v)", took, lease)
	}
	_ = l.Unlock(ctx)
}

// AcquireN takes k permits as k leases; Release by id, and of an unknown
// permit (ErrNotHeld); a waiter is woken by a release.
func TestSemaphorePermits(t *testing.T) {
	rdb := server(t)
	c, other := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	sem := c.Semaphore("five", 5)
	three, err := sem.AcquireN(ctx, 3, dlock.Wait(0))
	if err != nil || len(three) != 3 {
		t.Fatalf("AcquireN(3): %d leases, %v", len(three), err)
	}
	if three[0].ID() == three[1].ID() || three[0].Token() >= three[1].Token() || three[1].Token() >= three[2].Token() {
		t.Fatalf("permits share an id or tokens do not increase: %s %s, %d %d %d",
			three[0].ID(), three[1].ID(), three[0].Token(), three[1].Token(), three[2].Token())
	}
	if _, err := sem.AcquireN(ctx, 3, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("3 more of 5 with 3 taken: %v", err)
	}
	two, err := other.Semaphore("five", 5).AcquireN(ctx, 2, dlock.Wait(0))
	if err != nil {
		t.Fatalf("the 2 left: %v", err)
	}
	info, err := c.Inspect(ctx, "five")
	if err != nil || info.Shape != "semaphore" || info.Permits != 5 || len(info.Holders) != 5 {
		t.Fatalf("inspect: %+v %v", info, err)
	}

	// Release by id, on behalf of a holder: its Lease learns it lost the permit.
	if err := sem.Release(ctx, three[0].ID()); err != nil {
		t.Fatal(err)
	}
	if err := three[0].Verify(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("verify of a permit released by id: %v", err)
	}
	for _, id := range []string{three[0].ID(), "0123456789abcdef0123456789abcdef", "", "short"} {
		if err := sem.Release(ctx, id); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("release of unknown permit %q: %v", id, err)
		}
	}

	// All 5 in use again; a waiter is woken by the next release.
	l, err := sem.Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		l, err := other.Semaphore("five", 5).Acquire(ctx, dlock.Wait(20*time.Second))
		if err != nil {
			t.Error(err)
		} else {
			_ = l.Unlock(ctx)
		}
		got <- time.Now()
	}()
	waitForSubscriber(t, rdb, "dlock:{five}:wake")
	released := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if d := (<-got).Sub(released); d > 2*time.Second {
		t.Fatalf("waiter got the permit %v after the release (30s lease: not woken)", d)
	}
	for _, l := range append(three[1:], two...) {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := three[0].Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("unlock of the permit released by id: %v", err)
	}
}

// A wake-up that a waiter for several permits cannot use is passed on to a
// waiter for fewer.
func TestSemaphorePassOn(t *testing.T) {
	rdb := server(t)
	c, holder := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	all, err := holder.Semaphore("three", 3).AcquireN(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	big := make(chan error, 1)
	go func() {
		ls, err := c.Semaphore("three", 3).AcquireN(ctx, 2, dlock.Wait(time.Second))
		for _, l := range ls {
			_ = l.Unlock(ctx)
		}
		big <- err
	}()
	waitForSubscriber(t, rdb, "dlock:{three}:wake")
	small := make(chan time.Time, 1)
	go func() {
		l, err := c.Semaphore("three", 3).Acquire(ctx, dlock.Wait(20*time.Second))
		if err != nil {
			t.Error(err)
		} else {
			defer l.Unlock(ctx)
		}
		small <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond) // both waiting, the big one first
	released := time.Now()
	if err := all[0].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if d := (<-small).Sub(released); d > 2*time.Second {
		t.Fatalf("waiter for 1 permit got it %v after the release", d)
	}
	if err := <-big; !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("waiter for 2 permits: %v, want ErrNotAcquired", err)
	}
	for _, l := range all[1:] {
		_ = l.Unlock(ctx)
	}
}

func ExampleSemaphore() {
	rdb := exampleRedis()
	defer rdb.Close()
	c, err := dlock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	// At most 3 exports run at once across all replicas.
	sem := c.Semaphore("exports", 3)
	l, err := sem.Acquire(ctx, dlock.Wait(5*time.Second))
	if err != nil {
		panic(err)
	}
	defer l.Unlock(ctx)
	info, _ := c.Inspect(ctx, "exports")
	fmt.Println(len(info.Holders), "of", info.Permits, "permits in use")
	// Output: 1 of 3 permits in use
}
