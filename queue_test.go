package dlock_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/redis/go-redis/v9"
)

// queuedLockers returns one Locker of each shape that queues its waiters.
func queuedLockers(c *dlock.Client, name string) map[string]dlock.Locker {
	return map[string]dlock.Locker{"mutex": c.Mutex(name), "lock": c.Lock(name), "fair": c.FairLock(name)}
}

// A contended release hands the lock to the waiting Client with the grant in
// the message: once its Client listens on the channel (a second round), the
// waiter runs exactly one acquire script (its refused, queuing attempt) and
// no claim, and its token is above the holder's.
func TestHandoffNeedsNoClaim(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	cs := newClients(t, srv.Addr(), 2)
	ctx := context.Background()
	for shape := range queuedLockers(cs[0], "x") {
		t.Run(shape, func(t *testing.T) {
			name := "noclaim-" + shape
			// Round 0 subscribes the waiter's Client (the confirmation
			// wakes the waiter for one more attempt) and loads the scripts.
			for round := range 2 {
				holder, err := queuedLockers(cs[0], name)[shape].Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				before := scriptCalls(t, rdb)
				got := make(chan *dlock.Lease, 1)
				go func() {
					l, err := queuedLockers(cs[1], name)[shape].Acquire(ctx, dlock.Wait(10*time.Second))
					if err != nil {
						t.Error(err)
					}
					got <- l
				}()
				eventually(t, 10*time.Second, "waiter queued", func() bool { return zcard(rdb, "dlock:{"+name+"}:queue") == 1 })
				waitForSubscriber(t, rdb, "dlock:{"+name+"}:wake")
				if err := holder.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				l := <-got
				if l == nil {
					t.FailNow()
				}
				// the waiter's attempt and the holder's release
				if n := scriptCalls(t, rdb) - before; round == 1 && n != 2 {
					t.Errorf("%d script calls from the waiter's first attempt to its grant, want 2 (attempt, release)", n)
				}
				if l.Token() <= holder.Token() {
					t.Errorf("hand-off token %d not above the holder's %d", l.Token(), holder.Token())
				}
				if err := l.Verify(ctx); err != nil {
					t.Errorf("verify after the hand-off: %v", err)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A hand-off grants at most what is left of the waiter's queue deadline; the
// holder's Client extends it to the lease it asked for before that runs out,
// so a hold that outlasts the short grant is not lost.
func TestHandoffTopUp(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	for shape := range queuedLockers(a, "x") {
		t.Run(shape, func(t *testing.T) {
			name := "topup-" + shape
			// Round 0 subscribes the waiter's Client: the confirmation wakes
			// the waiter for an attempt that may claim the hand-off itself.
			for round := range 2 {
				holder, err := queuedLockers(a, name)[shape].Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got := make(chan *dlock.Lease, 1)
				go func() {
					l, err := queuedLockers(b, name)[shape].Acquire(ctx, dlock.Wait(10*time.Second),
						dlock.LeaseTime(5*time.Second), dlock.QueueTimeout(600*time.Millisecond))
					if err != nil {
						t.Error(err)
					}
					got <- l
				}()
				eventually(t, 10*time.Second, "waiter queued", func() bool { return zcard(rdb, "dlock:{"+name+"}:queue") == 1 })
				if round == 0 {
					waitForSubscriber(t, rdb, "dlock:{"+name+"}:wake")
				}
				if err := holder.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				l := <-got
				if l == nil {
					t.FailNow()
				}
				if round == 1 {
					if ttl := rdb.PTTL(ctx, "dlock:{"+name+"}").Val(); ttl > 600*time.Millisecond {
						t.Fatalf("hand-off TTL %v, want at most the 600 ms queue timeout", ttl)
					}
					// well past the short grant: the lease (5 s) still holds
					eventually(t, 5*time.Second, "grant extended", func() bool { return rdb.PTTL(ctx, "dlock:{"+name+"}").Val() > 2*time.Second })
					time.Sleep(800 * time.Millisecond)
					if err := l.Err(); err != nil {
						t.Fatalf("lease lost after the short hand-off grant: %v", err)
					}
					if err := l.Verify(ctx); err != nil {
						t.Fatal(err)
					}
				}
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// Waiters that give up leave no queue entry (cancelled, Wait ran out), and
// Wait(0) never queues, for every queued shape.
func TestQueuedWaiterLeaves(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	ctx := context.Background()
	for shape := range queuedLockers(c, "x") {
		t.Run(shape, func(t *testing.T) {
			name := "leave-" + shape
			holder, err := queuedLockers(c, name)[shape].Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Unlock(ctx)
			entries := func() int64 {
				return zcard(rdb, "dlock:{"+name+"}:queue") + zcard(rdb, "dlock:{"+name+"}:timeouts")
			}
			cctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := queuedLockers(c, name)[shape].Acquire(cctx)
				done <- err
			}()
			eventually(t, 10*time.Second, "waiter queued", func() bool { return entries() == 2 })
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled waiter: %v", err)
			}
			// The place is left at once, or (Redis slow to answer) in the
			// background right after: Acquire returns by its ctx.
			eventually(t, 5*time.Second, "the cancelled waiter's place left", func() bool { return entries() == 0 })
			if _, err := queuedLockers(c, name)[shape].Acquire(ctx, dlock.Wait(100*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("Wait(100ms): %v", err)
			}
			if n := entries(); n != 0 {
				t.Fatalf("timed-out waiter left %d entries", n)
			}
			if _, err := queuedLockers(c, name)[shape].Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("Wait(0): %v", err)
			}
			if n := entries(); n != 0 {
				t.Fatalf("Wait(0) left %d entries", n)
			}
		})
	}
}

// A hand-off that races with the waiter's cancellation never leaves the lock
// stuck: the waiter either returns the lease or gives the grant back.
func TestQueuedHandoffCancelRace(t *testing.T) {
	rdb := server(t)
	a, b, other := newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	for shape := range queuedLockers(a, "x") {
		t.Run(shape, func(t *testing.T) {
			name := "race-" + shape
			granted := 0
			for i := range 30 {
				holder, err := queuedLockers(a, name)[shape].Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				cctx, cancel := context.WithCancel(ctx)
				res := make(chan *dlock.Lease, 1)
				go func() {
					l, _ := queuedLockers(b, name)[shape].Acquire(cctx)
					res <- l
				}()
				eventually(t, 10*time.Second, "waiter queued", func() bool { return zcard(rdb, "dlock:{"+name+"}:queue") == 1 })
				go func() {
					time.Sleep(time.Duration(i%8) * 100 * time.Microsecond)
					cancel()
				}()
				if err := holder.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if l := <-res; l != nil {
					granted++
					if err := l.Unlock(ctx); err != nil {
						t.Fatal(err)
					}
				}
				// The cancelled waiter gives a grant back at once, or in the
				// background right after: well within 2 s, not the 30 s lease.
				l, err := queuedLockers(other, name)[shape].Acquire(ctx, dlock.Wait(2*time.Second))
				if err != nil {
					t.Fatalf("round %d: lock stuck after the race: %v", i, err)
				}
				_ = l.Unlock(ctx)
			}
			t.Logf("waiter got the lease in %d of 30 rounds", granted)
		})
	}
}

// Many Clients on one hot name: every acquisition is exclusive (overlap
// witness), every waiter is served, and the queue is empty at the end.
func TestQueuedContention(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	cs := newClients(t, srv.Addr(), 8)
	ctx := context.Background()
	for shape := range queuedLockers(cs[0], "x") {
		t.Run(shape, func(t *testing.T) {
			name := "hot-" + shape
			var wit witness.Witness
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 25 {
						l, err := queuedLockers(cs[w%len(cs)], name)[shape].Acquire(ctx, dlock.Wait(20*time.Second))
						if err != nil {
							t.Error(err)
							return
						}
						wit.Enter(name)
						runtime.Gosched() // let a broken lock's second holder in
						wit.Exit(name)
						if err := l.Unlock(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if wit.Overlaps() != 0 || wit.Entries() != 16*25 {
				t.Fatalf("%d overlaps in %d acquisitions, want 0 in %d", wit.Overlaps(), wit.Entries(), 16*25)
			}
			if n := zcard(rdb, "dlock:{"+name+"}:queue"); n != 0 {
				t.Fatalf("%d waiters left in the queue", n)
			}
		})
	}
}

// A waiter whose Acquire fails while Redis cannot be reached (here: paused)
// leaves its place once Redis answers again, in the background, so the
// place does not hold hand-offs up until its queue timeout.
func TestQueuedLeaveRetried(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	fast := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { fast.Close() })
	holder, waiter := newClient(t, rdb), newClient(t, fast)
	ctx := context.Background()
	l, err := holder.Mutex("retry-leave").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Mutex("retry-leave").Acquire(wctx, dlock.QueueTimeout(time.Minute))
		done <- err
	}()
	eventually(t, 10*time.Second, "waiter queued", func() bool { return zcard(rdb, "dlock:{retry-leave}:queue") == 1 })
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	// its own refresh timer would not run again: the call has returned
	eventually(t, 10*time.Second, "place left after Redis came back", func() bool { return zcard(rdb, "dlock:{retry-leave}:queue") == 0 })
}

// A queued waiter whose Client does not listen (gone, cut off, not subscribed
// yet) is passed over by a release and keeps its place; the next waiter gets
// the lock at once instead of after the silent one's grant ran out.
func TestHandoffPassesOverSilentClient(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	for shape := range queuedLockers(a, "x") {
		t.Run(shape, func(t *testing.T) {
			name := "silent-" + shape
			holder, err := queuedLockers(a, name)[shape].Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// a live place (deadline in an hour) of a Client nobody listens for, first in line
			silent := "0123456789abcdef|" + strings.Repeat("ab", 16) + "|30000|nobodylistens000|host|1|0|"
			rdb.ZAdd(ctx, "dlock:{"+name+"}:queue", redis.Z{Score: 0, Member: silent})
			rdb.ZAdd(ctx, "dlock:{"+name+"}:timeouts", redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: silent})
			got := make(chan error, 1)
			go func() {
				l, err := queuedLockers(b, name)[shape].Acquire(ctx, dlock.Wait(20*time.Second))
				if err == nil {
					err = l.Unlock(ctx)
				}
				got <- err
			}()
			eventually(t, 10*time.Second, "waiter queued", func() bool { return zcard(rdb, "dlock:{"+name+"}:queue") == 2 })
			waitForSubscriber(t, rdb, "dlock:{"+name+"}:wake")
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the live waiter behind a silent one was not served within 5s")
			}
			if n := zcard(rdb, "dlock:{"+name+"}:queue"); n != 1 {
				t.Fatalf("%d places left, want the silent one's", n)
			}
			rdb.Del(ctx, "dlock:{"+name+"}:queue", "dlock:{"+name+"}:timeouts")
		})
	}
}
