package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// pairUnder acquires lk under a ctx with a deadline d away (with opts) and
// unlocks it under the same ctx, failing t on either error.
func pairUnder(t *testing.T, lk dlock.Locker, d time.Duration, opts ...dlock.Option) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	l, err := lk.Acquire(ctx, opts...)
	if err != nil {
		t.Fatalf("%T: Acquire: %v", lk, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("%T: Unlock: %v", lk, err)
	}
}

// TestDeadlineSharesPool: the calls of an Acquire under a deadline, on a
// go-redis client with its default options, go through the user's
// connection pool (no second pool, no more connections than calls at once
// need), and the locks they take behave as any other.
func TestDeadlineSharesPool(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	before := rdb.PoolStats()
	const n = 50
	for i := range n {
		pairUnder(t, c.Mutex(fmt.Sprintf("pool-%d", i)), 5*time.Second)
	}
	after := rdb.PoolStats()
	used := (after.Hits + after.Misses) - (before.Hits + before.Misses)
	if used < 2*n {
		t.Errorf("%d acquire/release pairs under a deadline took %d connections from the user's pool, want >= %d: they went through a pool of their own", n, used, 2*n)
	}
	if after.TotalConns > 2 {
		t.Errorf("the user's pool holds %d connections after one caller's calls, want <= 2", after.TotalConns)
	}
}

// TestDeadlineEveryClient: with go-redis's default options (no
// ContextTimeoutEnabled, 3 s read timeout, 3 retries) an Acquire under a
// 300 ms deadline returns by it when every server is paused (SIGSTOP), on
// every kind of go-redis client New takes (standalone, Sentinel failover,
// Cluster); once they resume, Acquire and Unlock under a deadline work.
func TestDeadlineEveryClient(t *testing.T) {
	type setup struct {
		rdb     redis.UniversalClient
		servers []*redisproc.Server
	}
	kinds := map[string]func(t *testing.T) setup{
		"standalone": func(t *testing.T) setup {
			s := redistest.Start(t)
			return setup{redistest.Client(t, s), []*redisproc.Server{s}}
		},
		"cluster": func(t *testing.T) setup {
			cl := redistest.StartCluster(t, 3)
			return setup{redistest.ClusterClient(t, cl), cl.Nodes}
		},
		"failover": func(t *testing.T) setup {
			s := redistest.StartSentinel(t, redisproc.SentinelOptions{})
			// The Sentinels too: none starts a failover during the pause.
			return setup{redistest.FailoverClient(t, s), append([]*redisproc.Server{s.Master}, s.Sentinels...)}
		},
	}
	for _, kind := range []string{"standalone", "failover", "cluster"} {
		t.Run(kind, func(t *testing.T) {
			s := kinds[kind](t)
			c := newClient(t, s.rdb)
			names := []string{"every-a", "every-b", "every-c"}
			for _, name := range names { // healthy: grants and releases under a deadline
				pairUnder(t, c.Lock(name), 5*time.Second)
			}
			for _, srv := range s.servers {
				if err := srv.Pause(); err != nil {
					t.Fatal(err)
				}
			}
			resumed := false
			resume := func() {
				if resumed {
					return
				}
				resumed = true
				for _, srv := range s.servers {
					if err := srv.Resume(); err != nil {
						t.Error(err)
					}
				}
			}
			defer resume()
			const deadline, slack = 300 * time.Millisecond, 400 * time.Millisecond
			for _, lk := range []dlock.Locker{c.Mutex("every-a"), c.Lock("every-b"), c.Semaphore("every-c", 2)} {
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				start := time.Now()
				l, err := lk.Acquire(ctx)
				took := time.Since(start)
				cancel()
				if err == nil {
					t.Errorf("%T: Acquire with every server paused succeeded (token %d)", lk, l.Token())
					continue
				}
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("%T: Acquire = %v, want an error wrapping context.DeadlineExceeded", lk, err)
				}
				if took > deadline+slack {
					t.Errorf("%T: Acquire returned %v after it was called, its ctx's deadline %v", lk, took, deadline)
				}
			}
			resume()
			// The servers answer again: the locks are free once the calls cut
			// at the deadline are undone (their grants given back).
			for _, lk := range []dlock.Locker{c.Mutex("every-a"), c.Lock("every-b")} {
				pairUnder(t, lk, 10*time.Second, dlock.Wait(8*time.Second))
			}
		})
	}
}

// TestDeadlineReentryNeverSent: a reader that re-enters its own read lock
// (the Lease's Context) under a deadline whose call could not even be
// sent (the client's one connection is busy past the deadline) gets
// DeadlineExceeded, and its first hold stays: nothing undoes a re-entry
// that may not have happened by releasing one hold of the owner.
func TestDeadlineReentryNeverSent(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	direct := redistest.Client(t, srv)
	c := newClient(t, rdb)
	other := newClient(t, direct)
	rw := c.RWLock("reentry")
	r, err := rw.ReadLock().Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := direct.ConfigSet(context.Background(), "notify-keyspace-events", "Kh").Err(); err != nil {
		t.Fatal(err)
	}
	events := direct.PSubscribe(context.Background(), "__keyspace@0__:*{reentry}*")
	defer events.Close()
	if _, err := events.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The one connection of rdb's pool is busy for 1.5 s.
	var busy sync.WaitGroup
	busy.Go(func() { _ = rdb.BLPop(context.Background(), 1500*time.Millisecond, "reentry-nothing").Err() })
	// Until Redis runs the BLPOP: then it has the connection.
	for deadline := time.Now().Add(5 * time.Second); ; {
		list, err := direct.ClientList(context.Background()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(list, "cmd=blpop") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the BLPOP did not reach Redis within 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(r.Context(), 300*time.Millisecond)
	_, err = rw.ReadLock().Acquire(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("re-entry while the pool is busy = %v, want DeadlineExceeded", err)
	}
	busy.Wait()
	// The re-entry is sent once the connection is free (or never): then it
	// is given back. Wait for the hash to have settled: two writes (the
	// re-entry and its give-back) or a delete.
	msgs := events.Channel()
	timeout := time.After(10 * time.Second)
	writes := 0
	for writes < 2 {
		select {
		case m := <-msgs:
			switch m.Payload {
			case "hset":
				writes++
			case "hdel", "del":
				t.Fatalf("the owner's read hold was deleted (%s on %s) after a re-entry that failed", m.Payload, m.Channel)
			}
		case <-timeout:
			t.Fatalf("after 10 s, %d writes of the read holds; want the re-entry and its give-back", writes)
		}
	}
	if err := r.Err(); err != nil {
		t.Fatalf("first read hold: %v", err)
	}
	if w, err := other.RWLock("reentry").WriteLock().Acquire(context.Background(), dlock.Wait(0)); err == nil {
		_ = w.Unlock(context.Background())
		t.Fatal("a writer got the lock while the first read hold was live")
	} else if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatal(err)
	}
	if err := r.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock of the first read hold: %v", err)
	}
}
