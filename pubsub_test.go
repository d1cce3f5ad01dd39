package dlock_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/peerlink"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// An Acquire that joins a wake channel while the pub/sub connection is
// being re-established returns by its ctx's deadline: the connection was
// cut (CLIENT KILL TYPE pubsub) and go-redis dials again into a dead
// server (a partition that lets new connections in and nothing through:
// its SUBSCRIBE waits the client's ReadTimeout). Commands on the pooled
// connections still answer. The failed SUBSCRIBE is counted in Stats, and
// once the server is reachable again a release wakes the waiter.
func TestJoinWhileSubscriberReconnects(t *testing.T) {
	srv := redistest.Start(t)
	admin := redistest.Client(t, srv)
	dead, err := peerlink.NewProxy(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	dead.Cut()
	var partitioned atomic.Bool
	var once sync.Once
	dialedDead := make(chan struct{})
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if partitioned.Load() {
			addr = dead.Addr()
			once.Do(func() { close(dialedDead) })
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}})
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb)
	holder := newClient(t, admin)
	ctx := context.Background()
	warm, err := holder.Mutex("warm").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer warm.Unlock(ctx)
	x, err := holder.Mutex("x").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The pub/sub connection is up (a wait subscribed a channel) and the
	// pool holds connections for the commands.
	if _, err := c.Mutex("warm").Acquire(ctx, dlock.Wait(300*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("warm-up wait: %v", err)
	}
	partitioned.Store(true)
	if err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-dialedDead:
	case <-time.After(10 * time.Second):
		t.Fatal("go-redis did not dial the pub/sub connection again")
	}
	const wait = 500 * time.Millisecond
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	start := time.Now()
	_, err = c.Mutex("x").Acquire(actx)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire while the pub/sub connection is re-established: %v, want the ctx's deadline", err)
	}
	if bound := wait + 300*time.Millisecond; took > bound {
		t.Fatalf("Acquire with a %v deadline returned after %v while the pub/sub connection was re-established, want within %v", wait, took, bound)
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.Stats().SubscribeErrors == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the failed SUBSCRIBE was not counted")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("Stats after the partition: %+v", c.Stats())
	partitioned.Store(false)
	got := make(chan error, 1)
	go func() {
		l, err := c.Mutex("x").Acquire(ctx, dlock.Wait(20*time.Second))
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond) // queued
	if err := x.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter after the partition healed: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not get the lock released 5 s ago")
	}
}
