package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/redis/go-redis/v9"
)

// The permit count lives in Redis: the first acquisition sets it, a
// Semaphore with another count is refused (nothing changes), SetPermits
// changes it for everyone and wakes the waiters a larger count lets in.
func TestSemaphorePermitsInTheStore(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	first, err := a.Semaphore("perm", 1).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	keysBefore := rdb.Keys(ctx, "*").Val()
	_, err = b.Semaphore("perm", 3).Acquire(ctx, dlock.Wait(0))
	if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "1 permits") {
		t.Fatalf("a Semaphore of 3 on a name the store keeps 1 for: %v, want ErrInvalidArgument naming the 1", err)
	}
	if after := rdb.Keys(ctx, "*").Val(); len(after) != len(keysBefore) {
		t.Fatalf("the refused acquisition changed keys: %v, was %v", after, keysBefore)
	}
	if info, err := a.Inspect(ctx, "perm"); err != nil || info.Permits != 1 {
		t.Fatalf("Inspect: %+v %v, want 1 permit", info, err)
	}

	// A waiter for the one permit gets a second one when the count is raised.
	got := make(chan error, 1)
	go func() {
		l, err := b.Semaphore("perm", 1).Acquire(ctx, dlock.Wait(10*time.Second))
		if err == nil {
			_ = l.Unlock(ctx)
		}
		got <- err
	}()
	waitForWaiters(t, rdb, "perm")
	bigger := b.Semaphore("perm", 1)
	if err := bigger.SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		// the waiter's Semaphore still says 1: refused as a mismatch, at once
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("the waiter with the old count: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not woken by SetPermits")
	}
	second, err := bigger.Acquire(ctx, dlock.Wait(time.Second))
	if err != nil {
		t.Fatalf("a second permit after SetPermits(2): %v", err)
	}
	if _, err := bigger.Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a third permit of 2: %v", err)
	}
	if info, _ := a.Inspect(ctx, "perm"); info.Permits != 2 || len(info.Holders) != 2 {
		t.Fatalf("Inspect after SetPermits: %+v", info)
	}
	for _, l := range []*dlock.Lease{first, second} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The count outlives the permits and a force unlock, like the fence.
	if _, err := a.ForceUnlock(ctx, "perm"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Semaphore("perm", 5).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("after the permits were released and a force unlock: %v, want the stored count kept", err)
	}
	if err := bigger.SetPermits(ctx, 0); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("SetPermits(0): %v", err)
	}
}

// waitForWaiters waits until a waiter of name's semaphore listens on its
// wake channel (it has tried, been refused, and waits).
func waitForWaiters(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	ch := "dlock:{" + name + "}:wake"
	eventually(t, 5*time.Second, "a waiter subscribed to "+ch, func() bool {
		return rdb.PubSubNumSub(context.Background(), ch).Val()[ch] > 0
	})
}
