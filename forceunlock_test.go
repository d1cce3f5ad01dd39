package dlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/seam"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// An operator removes a held lock: its keys go, the fence counter stays (the
// next token is greater), a waiter in another process is woken at once, and
// the old holder finds the loss.
func TestForceUnlock(t *testing.T) {
	rdb := server(t)
	holder := newClient(t, rdb, dlock.Config{Label: "stuck-worker"})
	waiter := newClient(t, rdb)
	ops := newClient(t, rdb)
	ctx := context.Background()

	stuck, err := holder.Lock("stock:1").Acquire(ctx) // watchdog: 30 s lease, renewed
	if err != nil {
		t.Fatal(err)
	}
	// Keys a lock of another shape keeps beside its main key, and a lock
	// whose name extends this one's: only the former belong to stock:1.
	if err := rdb.ZAdd(ctx, "dlock:{stock:1}:rw:readers", redis.Z{Score: 1, Member: "w1"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "dlock:{stock:1}:permits", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	neighbour, err := holder.Mutex("stock:10").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}

	got := make(chan *dlock.Lease, 1)
	errc := make(chan error, 1)
	go func() {
		// its timer: the holder's 30 s TTL, or a place refresh every 10 s
		l, err := waiter.Lock("stock:1").Acquire(ctx, dlock.Wait(time.Minute), dlock.QueueTimeout(30*time.Second))
		if err != nil {
			errc <- err
			return
		}
		got <- l
	}()
	waitForSubscriber(t, rdb, "dlock:{stock:1}:wake")

	start := time.Now()
	r, err := ops.ForceUnlock(ctx, "stock:1")
	if err != nil {
		t.Fatal(err)
	}
	// the waiter's place in the queue goes too
	want := []string{"dlock:{stock:1}", "dlock:{stock:1}:permits", "dlock:{stock:1}:queue", "dlock:{stock:1}:rw:readers", "dlock:{stock:1}:timeouts"}
	if !slices.Equal(r.Keys, want) {
		t.Fatalf("removed %v, want %v", r.Keys, want)
	}
	if r.Info.Shape != "lock" || len(r.Info.Holders) != 1 || r.Info.Holders[0].Label != "stuck-worker" || r.Info.Holders[0].Fence != stuck.Token() {
		t.Fatalf("removal info %+v, want the stuck worker's lock (token %d)", r.Info, stuck.Token())
	}
	if n, err := rdb.Exists(ctx, dlock.FenceKey("stock:1"), "dlock:{stock:10}").Result(); err != nil || n != 2 {
		t.Fatalf("fence counter and neighbour lock: %d of 2 left (%v)", n, err)
	}

	// The waiter's own timer would wait 10 s: only the wake-up gets it in
	// well before.
	var next *dlock.Lease
	select {
	case next = <-got:
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by the forced unlock")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("waiter got the lock after %v", d)
	}
	if next.Token() <= stuck.Token() {
		t.Fatalf("token after the forced unlock %d, want > %d", next.Token(), stuck.Token())
	}
	if err := stuck.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("old holder's unlock = %v, want ErrLockLost", err)
	}
	for _, l := range []*dlock.Lease{next, neighbour} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A free lock: nothing removed, no error. Glob characters in the name are
// literal. Bad names change nothing.
func TestForceUnlockEdges(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	ctx := context.Background()
	r, err := c.ForceUnlock(ctx, "free:1")
	if err != nil || len(r.Keys) != 0 || r.Info.Held {
		t.Fatalf("ForceUnlock(free) = %+v, %v; want nothing removed", r, err)
	}

	star, err := c.Mutex("a*").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.Mutex("ab").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, "dlock:{ab}:queue", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r, err = c.ForceUnlock(ctx, "a*")
	if err != nil || !slices.Equal(r.Keys, []string{"dlock:{a*}"}) {
		t.Fatalf("ForceUnlock(a*) = %v, %v; want only dlock:{a*}", r.Keys, err)
	}
	if err := other.Verify(ctx); err != nil {
		t.Fatalf("lock ab touched: %v", err)
	}
	if err := star.Verify(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("a* after force unlock: %v, want ErrLockLost", err)
	}
	_ = other.Unlock(ctx)

	// A key of a shape Inspect does not know is still removed.
	if err := rdb.SAdd(ctx, "dlock:{odd}", "x").Err(); err != nil {
		t.Fatal(err)
	}
	r, err = c.ForceUnlock(ctx, "odd")
	if err != nil || !slices.Equal(r.Keys, []string{"dlock:{odd}"}) || r.Info.Shape != "" {
		t.Fatalf("ForceUnlock(odd) = %+v, %v", r, err)
	}

	for _, name := range []string{"", strings.Repeat("x", seam.MaxNameLen+1)} {
		if _, err := c.ForceUnlock(ctx, name); !errors.Is(err, dlock.ErrInvalidName) {
			t.Fatalf("ForceUnlock(%d bytes) = %v, want ErrInvalidName", len(name), err)
		}
	}
}

// On a Cluster the lock's keys (one hash slot) are found on their master.
func TestForceUnlockCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	rdb := redistest.ClusterClient(t, cl)
	c := newClient(t, rdb)
	ctx := context.Background()
	for _, name := range []string{"a:1", "b:2", "c:3", "d:4"} {
		l, err := c.Lock(name).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := rdb.Set(ctx, "dlock:{"+name+"}:queue", "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		r, err := c.ForceUnlock(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"dlock:{" + name + "}", "dlock:{" + name + "}:queue"}; !slices.Equal(r.Keys, want) {
			t.Fatalf("%s: removed %v, want %v", name, r.Keys, want)
		}
		if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("%s: unlock after force = %v, want ErrLockLost", name, err)
		}
	}
}
