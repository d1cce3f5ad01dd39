package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// fairQueue is the key of a FairLock's queue (see lua/queue_lib.lua).
func fairQueue(name string) string { return "dlock:{" + name + "}:queue" }

// 8 owners on 4 Clients arriving 20 ms apart (each one queued before the
// next arrives) acquire in arrival order, with increasing tokens; 20 rounds.
func TestFairOrder(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	cs := newClients(t, srv.Addr(), 4)
	ctx := context.Background()
	for round := range 20 {
		holder, err := cs[0].FairLock("order").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var order []int
		last := holder.Token()
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := cs[i%4].FairLock("order").Acquire(ctx, dlock.Wait(20*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order = append(order, i)
				if l.Token() <= last {
					t.Errorf("waiter %d's token %d not above the previous grant's %d", i, l.Token(), last)
				}
				last = l.Token()
				mu.Unlock()
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}()
			time.Sleep(20 * time.Millisecond)
			eventually(t, 10*time.Second, fmt.Sprintf("waiter %d queued", i), func() bool { return zcard(rdb, fairQueue("order")) == int64(i+1) })
		}
		if err := holder.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if want := []int{0, 1, 2, 3, 4, 5, 6, 7}; !slices.Equal(order, want) {
			t.Fatalf("round %d: acquired in order %v, want %v", round, order, want)
		}
	}
	if n := zcard(rdb, fairQueue("order")); n != 0 {
		t.Fatalf("%d queue entries left", n)
	}
}

// 100 waiters queue one after the other; each acquires exactly once, in
// arrival order, and each hand-off costs 1 script call once the queue is
// built: the release, which hands the lock over and tells only the next
// waiter, who needs no claim (give or take a few retries woken by a
// subscription confirmation).
func TestFairHundredWaiters(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	cs := newClients(t, srv.Addr(), 4)
	ctx := context.Background()
	const n = 100
	holder, err := cs[0].FairLock("hundred").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A long queue timeout: no refreshes while the queue builds up,
			// so the script count below is the hand-offs' alone.
			l, err := cs[i%4].FairLock("hundred").Acquire(ctx, dlock.Wait(60*time.Second), dlock.QueueTimeout(time.Minute))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			if err := l.Unlock(ctx); err != nil {
				t.Error(err)
			}
		}()
		eventually(t, 10*time.Second, fmt.Sprintf("waiter %d queued", i), func() bool { return zcard(rdb, fairQueue("hundred")) == int64(i+1) })
	}
	before := scriptCalls(t, rdb)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	calls := scriptCalls(t, rdb) - before - 1 // the holder's release
	t.Logf("%.2f script calls per hand-off", float64(calls)/n)
	if len(order) != n {
		t.Fatalf("%d of %d waiters acquired", len(order), n)
	}
	for i, got := range order {
		if got != i {
			t.Fatalf("acquisition %d went to waiter %d (order %v)", i, got, order)
		}
	}
	if calls > n+5 {
		t.Fatalf("%d script calls for %d hand-offs, want about 1 each (the release)", calls, n)
	}
	if n := zcard(rdb, fairQueue("hundred")); n != 0 {
		t.Fatalf("%d queue entries left", n)
	}
}

// A waiter process SIGKILLed in the middle of the queue blocks the waiters
// behind it for no longer than its queue timeout (in practice not at all: its
// connection is closed, so the hand-off message reaches nobody and the
// release passes it over).
func TestFairKilledWaiter(t *testing.T) {
	const qt = time.Second
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	cs := newClients(t, srv.Addr(), 2)
	ctx := context.Background()
	holder, err := cs[0].FairLock("killed").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	waiter := func(c *dlock.Client, who string) {
		l, err := c.FairLock("killed").Acquire(ctx, dlock.Wait(30*time.Second), dlock.QueueTimeout(qt))
		if err != nil {
			t.Error(who, err)
			got <- ""
			return
		}
		got <- who
		_ = l.Unlock(ctx)
	}
	go waiter(cs[0], "A")
	eventually(t, 10*time.Second, "A queued", func() bool { return zcard(rdb, fairQueue("killed")) == 1 })
	child := startHelper(t, "fair-wait", srv.Addr(), "killed", qt)
	eventually(t, 20*time.Second, "child queued", func() bool { return zcard(rdb, fairQueue("killed")) == 2 })
	go waiter(cs[1], "B")
	eventually(t, 10*time.Second, "B queued", func() bool { return zcard(rdb, fairQueue("killed")) == 3 })

	child.kill(t)
	killed := time.Now()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if who := <-got; who != "A" {
		t.Fatalf("first after the holder: %q, want A", who)
	}
	// The dead waiter is passed over, or its place expires at most qt after
	// its last refresh (before the kill); B refreshes every qt/3.
	bound := qt + qt/3 + time.Second
	select {
	case who := <-got:
		if who != "B" {
			t.Fatalf("second: %q, want B", who)
		}
		t.Logf("B acquired %v after the kill", time.Since(killed))
	case <-time.After(bound):
		t.Fatalf("B still blocked %v after the waiter before it was killed", bound)
	}
	eventually(t, 5*time.Second, "queue empty", func() bool { return zcard(rdb, fairQueue("killed")) == 0 })
}

// Wait(0) does not overtake the queue: with waiters queued, a free lock goes
// to the first of them, not to the caller that just tried.
func TestFairTryDoesNotOvertake(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	holder, err := a.FairLock("try").Acquire(ctx, dlock.LeaseTime(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := b.FairLock("try").Acquire(ctx, dlock.Wait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	eventually(t, 10*time.Second, "waiter queued", func() bool { return zcard(rdb, fairQueue("try")) == 1 })
	// The holder's lease runs out (an expiry publishes nothing); a try
	// finds the lock free but hands it to the waiter instead of taking it.
	<-holder.Done()
	time.Sleep(50 * time.Millisecond)
	if _, err := a.FairLock("try").Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Wait(0) with a waiter queued: %v, want ErrNotAcquired", err)
	}
	select {
	case l := <-got:
		if l == nil {
			t.FailNow()
		}
		_ = l.Unlock(ctx)
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not granted within 5s of the expiry")
	}
}

// A queue member that cannot be parsed (another version, a hand edit) is
// skipped: the next waiter gets the lock.
func TestFairSkipsMalformedMember(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	holder, err := a.FairLock("bad").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb.ZAdd(ctx, fairQueue("bad"), redis.Z{Score: 0, Member: "garbage"})
	rdb.ZAdd(ctx, "dlock:{bad}:timeouts", redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: "garbage"})
	got := make(chan error, 1)
	go func() {
		l, err := b.FairLock("bad").Acquire(ctx, dlock.Wait(10*time.Second))
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	eventually(t, 10*time.Second, "waiter queued", func() bool { return zcard(rdb, fairQueue("bad")) == 2 })
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("waiter behind a malformed member not served within 2s")
	}
}

// Re-entry through the lease's Context does not queue behind waiters.
func TestFairReentrant(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	outer, err := a.FairLock("re").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		l, err := b.FairLock("re").Acquire(ctx, dlock.Wait(10*time.Second))
		if err == nil {
			_ = l.Unlock(ctx)
		}
	}()
	eventually(t, 10*time.Second, "waiter queued", func() bool { return zcard(rdb, fairQueue("re")) == 1 })
	inner, err := a.FairLock("re").Acquire(outer.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("re-entry with a waiter queued: %v", err)
	}
	if inner.Token() != outer.Token() {
		t.Fatalf("re-entry token %d, want %d", inner.Token(), outer.Token())
	}
	info, err := a.Inspect(ctx, "re")
	if err != nil || info.Shape != "fair" || info.Holders[0].Count != 2 || len(info.Queue) != 1 {
		t.Fatalf("inspect: %+v %v, want fair, count 2, one waiter", info, err)
	}
	if w := info.Queue[0]; w.Deadline <= 0 || w.Deadline > (5*time.Second) || w.PID == 0 {
		t.Fatalf("waiter %+v: want a deadline within the queue timeout and holder metadata", w)
	}
	_ = inner.Unlock(ctx)
	_ = outer.Unlock(ctx)
	eventually(t, 10*time.Second, "waiter served", func() bool {
		info, _ := a.Inspect(ctx, "re")
		return !info.Held && len(info.Queue) == 0
	})
}

func ExampleClient_FairLock() {
	rdb := exampleRedis()
	defer rdb.Close()
	c, err := dlock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	// Waiters get the lock in arrival order; a waiter that dies loses its
	// place after 2 s.
	l, err := c.FairLock("ticket:42").Acquire(ctx, dlock.Wait(10*time.Second), dlock.QueueTimeout(2*time.Second))
	if err != nil {
		panic(err)
	}
	defer l.Unlock(ctx)
	fmt.Println(l.Token() > 0)
	// Output: true
}
