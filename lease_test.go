package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/seam"
	"github.com/redis/go-redis/v9"
)

// The lost signal fires within one renewal interval (+ε) of the key
// vanishing, however it vanished.
func TestLostSignal(t *testing.T) {
	// ε covers a round trip and a busy scheduler; interval + ε stays well
	// under the lease, so the loss is the watchdog's finding, not expiry.
	const timeout = 900 * time.Millisecond
	const interval = timeout / 3
	const eps = 250 * time.Millisecond
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	ctx := context.Background()
	cases := []struct {
		name   string
		vanish func(t *testing.T)
	}{
		{"DEL", func(t *testing.T) { rdb.Del(ctx, "dlock:{lost}") }},
		{"FLUSHALL", func(t *testing.T) { rdb.FlushAll(ctx) }},
		{"restart", func(t *testing.T) {
			if err := srv.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tc := range cases {
		for _, shape := range []string{"mutex", "lock"} {
			t.Run(tc.name+"/"+shape, func(t *testing.T) {
				c := newClient(t, rdb, dlock.Config{TTL: timeout})
				l, err := lockers(c, "lost")[shape].Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				waitRenewals(t, c, 1) // so the loss is the watchdog's finding, not expiry
				if err := l.Verify(ctx); err != nil {
					t.Fatalf("before: %v", err)
				}
				tc.vanish(t)
				gone := time.Now()
				if !closedWithin(l.Done(), interval+eps) {
					t.Fatalf("lost signal not within %v of the key vanishing", interval+eps)
				}
				took := time.Since(gone)
				if cause := context.Cause(l.Context()); !errors.Is(cause, dlock.ErrLockLost) {
					t.Fatalf("cause %v", cause)
				}
				if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
					t.Fatalf("unlock after loss: %v", err)
				}
				t.Logf("lost %v after the key vanished", took)
			})
		}
	}
}

// 000 §3.5: a 500 ms lease and 800 ms of work. The second owner gets in at
// about 500 ms, and by then A has already been told it lost the lock.
func TestLeaseShorterThanWork(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	start := time.Now()
	la, err := a.Lock("lease").Acquire(ctx, dlock.LeaseTime(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Lock("lease").Acquire(ctx, dlock.Wait(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	entered := time.Since(start)
	// A's lease ended on A's clock (its deadline, from before the acquire
	// was sent, minus the drift margin) before Redis could grant B: by the
	// time B holds it, A's Err reports the loss and Done is closed —
	// whatever the scheduler did to A's timer.
	if err := la.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("B got in at %v while A's Err was %v", entered, err)
	}
	select {
	case <-la.Done():
	default:
		t.Fatalf("B got in at %v while A's Done was open", entered)
	}
	if entered < 480*time.Millisecond || entered > 1500*time.Millisecond {
		t.Fatalf("B got in at %v, want about 500ms", entered)
	}
	if cause := context.Cause(la.Context()); !errors.Is(cause, dlock.ErrLockLost) {
		t.Fatalf("A's context cause = %v", cause)
	}
	_ = lb.Unlock(ctx)
	if err := la.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("A's unlock = %v, want ErrLockLost", err)
	}
}

func TestDo(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	ctx := context.Background()
	sentinel := errors.New("business failure")
	err := dlock.Do(ctx, c.Lock("do"), func(ctx context.Context, l *dlock.Lease) error { return sentinel })
	if !errors.Is(err, sentinel) {
		t.Fatalf("Do returned %v, want the section's error", err)
	}
	if n, _ := rdb.Exists(ctx, "dlock:{do}").Result(); n != 0 {
		t.Fatal("Do did not release after an error")
	}
	err = dlock.Do(ctx, c.Mutex("do"), func(ctx context.Context, l *dlock.Lease) error {
		rdb.Del(ctx, "dlock:{do}")
		return nil
	})
	if !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Do with the key deleted during fn: %v, want ErrLockLost", err)
	}
	err = dlock.Do(ctx, c.Mutex("do"), func(ctx context.Context, l *dlock.Lease) error {
		rdb.Del(ctx, "dlock:{do}")
		return sentinel
	})
	if !errors.Is(err, sentinel) || !errors.Is(err, dlock.ErrLockLost) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("Do failing after its lock was lost: %q, want one line wrapping both", err)
	}
	if strings.Count(err.Error(), "dlock:") > 1 {
		t.Fatalf("Do failing after its lock was lost: %q, want \"dlock:\" at most once", err)
	}
	err = dlock.Do(ctx, c.Mutex("do"), func(ctx context.Context, l *dlock.Lease) error {
		rdb.Del(ctx, "dlock:{do}")
		return l.Verify(ctx)
	})
	if !errors.Is(err, dlock.ErrLockLost) || strings.Count(err.Error(), "lock lost") != 1 || strings.Count(err.Error(), "dlock:") != 1 {
		t.Fatalf("Do whose fn saw the loss: %q, want the loss said once", err)
	}
	err = dlock.Do(ctx, c.Mutex("do"), func(ctx context.Context, l *dlock.Lease) error { return nil })
	if err != nil {
		t.Fatalf("clean Do: %v", err)
	}
	func() {
		defer func() { _ = recover() }()
		_ = dlock.Do(ctx, c.Mutex("do"), func(ctx context.Context, l *dlock.Lease) error { panic("boom") })
	}()
	if n, _ := rdb.Exists(ctx, "dlock:{do}").Result(); n != 0 {
		t.Fatal("Do did not release after a panic")
	}
	if err := dlock.Do(ctx, nil, nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("Do(nil): %v", err)
	}
}

func ExampleDo() {
	rdb := exampleRedis()
	defer rdb.Close()
	c, err := dlock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	err = dlock.Do(ctx, c.Lock("stock:1001"), func(ctx context.Context, l *dlock.Lease) error {
		// ... read, check, write; pass l.Token() to the storage ...
		return l.Verify(ctx) // check before commit
	}, dlock.Wait(3*time.Second))
	fmt.Println(err)
	// Output: <nil>
}

// 000 §3.1: A's lease runs out, B acquires, A unlocks: A learns it lost the
// lock and B's key is untouched.
func TestForeignRelease(t *testing.T) {
	rdb := server(t)
	for _, shape := range []string{"mutex", "lock"} {
		t.Run(shape, func(t *testing.T) {
			a, b := newClient(t, rdb), newClient(t, rdb)
			ctx := context.Background()
			name := "foreign-" + shape
			la, err := lockers(a, name)[shape].Acquire(ctx, dlock.LeaseTime(200*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			lb, err := lockers(b, name)[shape].Acquire(ctx, dlock.Wait(2*time.Second))
			if err != nil {
				t.Fatalf("B: %v", err)
			}
			if err := la.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
				t.Fatalf("A's unlock: %v, want ErrLockLost", err)
			}
			if err := lb.Verify(ctx); err != nil {
				t.Fatalf("B's lock after A's unlock: %v", err)
			}
			info, _ := b.Inspect(ctx, name)
			if !info.Held || info.Holders[0].Fence != lb.Token() {
				t.Fatalf("B's key changed: %+v", info)
			}
			if err := lb.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// slowReplies delays the replies of script calls by delay while on is
// set: a reply that arrives late, as over a slow network.
type slowReplies struct {
	on    atomic.Bool
	delay atomic.Int64 // ns
}

func (s *slowReplies) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *slowReplies) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if s.on.Load() && (cmd.Name() == "evalsha" || cmd.Name() == "eval" || cmd.Name() == "fcall") {
			time.Sleep(time.Duration(s.delay.Load()))
		}
		return err
	}
}
func (s *slowReplies) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLateGrantGivenBack: a grant whose reply arrives after its lease ran
// out on the client's clock is never used: it is given back (the lock is
// free for others at once) and Acquire goes on trying within its wait.
func TestLateGrantGivenBack(t *testing.T) {
	rdb := server(t)
	slow := &slowReplies{}
	slow.delay.Store(int64(400 * time.Millisecond))
	rdb.AddHook(slow)
	for _, lease := range []dlock.Option{{}, dlock.LeaseTime(300 * time.Millisecond)} {
		c := newClient(t, rdb, dlock.Config{TTL: 300 * time.Millisecond})
		slow.on.Store(true)
		_, err := c.Mutex("late").Acquire(context.Background(), dlock.Wait(time.Second), lease)
		slow.on.Store(false)
		if !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("every grant late: %v, want ErrNotAcquired", err)
		}
		if s := c.Stats(); s.Holds != 0 || s.Watched != 0 {
			t.Fatalf("stats after late grants: %+v", s)
		}
		other := newClient(t, rdb)
		l, err := other.Mutex("late").Acquire(context.Background(), dlock.Wait(0))
		if err != nil {
			t.Fatalf("a late grant was not given back: %v", err)
		}
		if err := l.Unlock(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNoZombieHold: grants that arrive around the moment their lease runs
// out (issue: a timer firing at once raced the watchdog's registration)
// never leave a hold the Client keeps renewing, and no returned Lease looks
// held after its deadline.
func TestNoZombieHold(t *testing.T) {
	rdb := server(t)
	slow := &slowReplies{}
	rdb.AddHook(slow)
	c := newClient(t, rdb, dlock.Config{TTL: 60 * time.Millisecond})
	ctx := context.Background()
	got := 0
	for i := range 60 {
		// Around the client-side deadline: 60 ms - Drift(60 ms) = 57.4 ms.
		slow.delay.Store(int64(52*time.Millisecond + time.Duration(i%12)*time.Millisecond))
		slow.on.Store(true)
		sent := time.Now()
		l, err := c.Lock("zombie").Acquire(ctx, dlock.Wait(0))
		slow.on.Store(false)
		if errors.Is(err, dlock.ErrNotAcquired) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		got++
		if time.Since(sent) >= 60*time.Millisecond && l.Err() == nil && l.Verify(ctx) != nil {
			t.Fatalf("round %d: Err nil past the deadline of a lock Redis no longer holds for us", i)
		}
		_ = l.Unlock(ctx)
	}
	if s := c.Stats(); s.Holds != 0 || s.Watched != 0 {
		t.Fatalf("after %d rounds (%d granted): %+v — a zombie hold", 60, got, s)
	}
}

// A lease lost while Redis is frozen (SIGSTOP) is unlocked at once: Unlock
// tries the release for at most LostReleaseTimeout and returns the loss,
// even with a ctx that never ends.
func TestUnlockLostWhileUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	c := newClient(t, rdb, dlock.Config{TTL: 300 * time.Millisecond})
	ctx := context.Background()
	l, err := c.Mutex("frozen").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease was not lost with Redis frozen")
	}
	start := time.Now()
	err = l.Unlock(ctx)
	took := time.Since(start)
	if !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock of the lost lease: %v, want ErrLockLost", err)
	}
	if took > seam.LostReleaseTimeout+2*time.Second {
		t.Fatalf("Unlock took %v with Redis frozen (bound %v)", took, seam.LostReleaseTimeout)
	}
}
