package dlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/redis/go-redis/v9"
)

// A retried acquire whose first reply was lost finds its own value and
// succeeds instead of waiting for itself. The server is kept busy (DEBUG
// SLEEP) past the client's read timeout, so go-redis re-sends the script and
// the server runs it twice.
func TestIdempotentAcquire(t *testing.T) {
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	admin := redistest.Client(t, srv)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ReadTimeout: 100 * time.Millisecond,
		MaxRetries: 10, MinRetryBackoff: 50 * time.Millisecond, MaxRetryBackoff: 100 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	ctx := context.Background()
	for _, shape := range []string{"mutex", "lock"} {
		t.Run(shape, func(t *testing.T) {
			c := newClient(t, rdb)
			name := "idem-" + shape
			// warm the script cache and the pool
			l, err := lockers(c, name)[shape].Acquire(ctx, dlock.Wait(0))
			if err != nil {
				t.Fatal(err)
			}
			_ = l.Unlock(ctx)
			before := int(scriptCalls(t, admin))
			slept := make(chan struct{})
			go func() {
				defer close(slept)
				if err := admin.Do(ctx, "DEBUG", "SLEEP", "0.25").Err(); err != nil {
					t.Error(err)
				}
			}()
			time.Sleep(20 * time.Millisecond)
			start := time.Now()
			l, err = lockers(c, name)[shape].Acquire(ctx, dlock.Wait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			<-slept
			t.Logf("acquire took %v", took)
			if n := int(scriptCalls(t, admin)) - before; n < 2 {
				t.Fatalf("the server ran the acquire %d times; the test needs a retried one", n)
			}
			if took > 2*time.Second {
				t.Fatalf("acquire took %v: it waited for itself", took)
			}
			info, err := c.Inspect(ctx, name)
			if err != nil || info.Holders[0].Count != 1 {
				t.Fatalf("after a retried acquire: %+v %v (want one hold)", info, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if n, _ := admin.Exists(ctx, "dlock:{"+name+"}").Result(); n != 0 {
				t.Fatal("key left after unlock")
			}
		})
	}
}

// SCRIPT FLUSH mid-run: acquire, renewal and release still work.
func TestScriptFlush(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb, dlock.Config{TTL: 300 * time.Millisecond})
	ctx := context.Background()
	l, err := c.Lock("flush").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rdb.ScriptFlush(ctx)
	waitRenewals(t, c, 3)
	if err := l.Verify(ctx); err != nil {
		t.Fatalf("renewal after SCRIPT FLUSH: %v", err)
	}
	rdb.ScriptFlush(ctx)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("unlock after SCRIPT FLUSH: %v", err)
	}
	rdb.ScriptFlush(ctx)
	l, err = c.Mutex("flush2").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("acquire after SCRIPT FLUSH: %v", err)
	}
	rdb.ScriptFlush(ctx)
	if err := l.Extend(ctx, time.Second); err != nil {
		t.Fatalf("extend after SCRIPT FLUSH: %v", err)
	}
	_ = l.Unlock(ctx)
}

func TestReplicaAck(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
	rdb := redistest.Client(t, master)
	waitReplicasOnline(t, rdb, 1)
	c := newClient(t, rdb)
	ctx := context.Background()

	// A healthy replica acknowledges within a second even on a loaded machine.
	l, err := c.Lock("ra").Acquire(ctx, dlock.ReplicaAck(1, time.Second), dlock.Wait(0))
	if err != nil {
		t.Fatalf("healthy replica: %v", err)
	}
	_ = l.Unlock(ctx)

	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	_, err = c.Lock("ra").Acquire(ctx, dlock.ReplicaAck(1, 100*time.Millisecond), dlock.Wait(0))
	if !errors.Is(err, dlock.ErrNotReplicated) {
		t.Fatalf("paused replica: %v, want ErrNotReplicated", err)
	}
	if n, _ := rdb.Exists(ctx, "dlock:{ra}").Result(); n != 0 {
		t.Fatal("unreplicated acquisition left its key")
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}

	// No replica at all: fail fast, or succeed in the "connected" mode.
	lone := server(t)
	cl := newClient(t, lone)
	start := time.Now()
	_, err = cl.Mutex("ra").Acquire(ctx, dlock.ReplicaAck(1, 2*time.Second), dlock.Wait(0))
	if !errors.Is(err, dlock.ErrNotReplicated) || time.Since(start) > 500*time.Millisecond {
		t.Fatalf("no replica: %v after %v, want ErrNotReplicated well under the 2s WAIT", err, time.Since(start))
	}
	if n, _ := lone.Exists(ctx, "dlock:{ra}").Result(); n != 0 {
		t.Fatal("failed acquisition left its key")
	}
	l, err = cl.Mutex("ra").Acquire(ctx, dlock.ReplicaAckConnected(2*time.Second), dlock.Wait(0))
	if err != nil {
		t.Fatalf("connected mode with no replica: %v", err)
	}
	_ = l.Unlock(ctx)
}

func waitReplicasOnline(t *testing.T, rdb *redis.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		info, _ := rdb.Info(context.Background(), "replication").Result()
		if strings.Count(info, "state=online") >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%d replicas not online within 10s", n)
}

// Through a Sentinel failover client: locks work before, and again after the
// master is killed and a replica promoted.
func TestSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t, redisprocSentinelOptions())
	rdb := redistest.FailoverClient(t, s)
	c := newClient(t, rdb)
	ctx := context.Background()
	l, err := c.Lock("sf").Acquire(ctx, dlock.Wait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(ctx)
	old := s.Master.Addr()
	if err := s.Master.Kill(); err != nil {
		t.Fatal(err)
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := s.WaitForFailover(fctx, old); err != nil {
		t.Fatal(err)
	}
	var lerr error
	for fctx.Err() == nil {
		if l, lerr = c.Lock("sf2").Acquire(fctx, dlock.Wait(time.Second)); lerr == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if lerr != nil {
		t.Fatalf("no lock through the failover client after failover: %v", lerr)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// On a 3-master Cluster: many names over all slots, concurrently, with the
// keys of each lock in one slot and wake-ups working.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	rdb := redistest.ClusterClient(t, cl)
	c := newClient(t, rdb)
	ctx := context.Background()
	var w witness.Witness
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				name := "c:" + strconv.Itoa(i%25)
				l, err := lockers(c, name)["lock"].Acquire(ctx, dlock.Wait(10*time.Second))
				if err != nil {
					errs <- err
					return
				}
				w.Enter(name)
				w.Exit(name)
				if err := l.Unlock(ctx); err != nil {
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
	if w.Overlaps() != 0 {
		t.Fatalf("%d overlaps", w.Overlaps())
	}
	// Hold 60 names at once and check they sit on every master.
	var held []*dlock.Lease
	for i := 0; i < 60; i++ {
		l, err := c.Mutex("spread:"+strconv.Itoa(i)).Acquire(ctx, dlock.Wait(0))
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	var nodes atomic.Int32
	_ = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		keys, _ := m.Keys(ctx, "dlock:{spread:*}").Result()
		if len(keys) > 0 {
			nodes.Add(1)
		}
		return nil
	})
	if n := nodes.Load(); n != 3 {
		t.Fatalf("locks on %d of 3 masters", n)
	}
	for _, l := range held {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
