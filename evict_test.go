package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/redis/go-redis/v9"
)

// When Redis ends a hold early. Redis has no lock-delay (docs/RELIABILITY.md,
// "When the service ends a hold early"): a lock key that Redis drops before
// its holder's lease runs out is handed on at once, and the holder is told
// at its next renewal. These tests measure that on a real redis-server, and
// show the configuration under which it cannot happen.

// fill writes 1 KiB values under keys of its own, without a TTL, a
// hundred at a time, until Redis refuses a write (out of memory: its used
// memory is then over maxmemory for good, not only while a big write is
// read) or done says to stop; it returns the error that stopped it (nil:
// done).
func fill(t *testing.T, rdb *redis.Client, done func() bool) error {
	t.Helper()
	ctx := context.Background()
	v := strings.Repeat("x", 1<<10)
	for i := 0; i < 100000; i += 100 {
		if done() {
			return nil
		}
		cmds, _ := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for j := range 100 {
				p.Set(ctx, fmt.Sprintf("filler:%d", i+j), v, 0)
			}
			return nil
		})
		if done() {
			return nil
		}
		for _, c := range cmds {
			if err := c.Err(); err != nil {
				return err
			}
		}
	}
	t.Fatal("Redis never ran out of memory")
	return nil
}

// unfill deletes fill's keys.
func unfill(t *testing.T, rdb *redis.Client) {
	t.Helper()
	ctx := context.Background()
	iter := rdb.Scan(ctx, 0, "filler:*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Fatal(err)
		}
		keys = keys[n:]
	}
}

// TestEvictedLockIsTold: a lock key evicted under maxmemory (volatile-ttl:
// the keys with a TTL go first, and a lock key is the one with a TTL) is
// granted to the waiter at once; its holder is told at its next renewal,
// within the watchdog's interval, not at its deadline.
func TestEvictedLockIsTold(t *testing.T) {
	rdb := server(t, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl")
	a := newClient(t, rdb, dlock.Config{TTL: 3 * time.Second}) // renewed every second
	b := newClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := a.Mutex("evicted").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	told := make(chan time.Time, 1)
	go func() {
		<-held.Done()
		told <- time.Now()
	}()
	key := "dlock:{evicted}"
	if err := fill(t, rdb, func() bool { return rdb.Exists(ctx, key).Val() == 0 }); err != nil {
		t.Fatalf("filling Redis: %v (the lock key was not evicted first)", err)
	}
	evicted := time.Now()
	unfill(t, rdb) // room for the waiter's keys
	l, err := b.Mutex("evicted").Acquire(ctx, dlock.Wait(5*time.Second))
	if err != nil {
		t.Fatalf("the waiter after the eviction: %v", err)
	}
	granted := time.Now()
	heldErr := held.Err()
	var at time.Time
	select {
	case at = <-told:
	case <-time.After(a.TTL()/3 + time.Second):
		t.Fatalf("the holder of the evicted lock was not told within its renewal interval (%v)", a.TTL()/3)
	}
	if !errors.Is(held.Err(), dlock.ErrLockLost) {
		t.Fatalf("holder Err %v, want ErrLockLost", held.Err())
	}
	t.Logf("evicted; the waiter granted %v later (the holder's Err then: %v), the holder told %v after the eviction",
		granted.Sub(evicted).Round(time.Millisecond), heldErr, at.Sub(evicted).Round(time.Millisecond))
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestNoEvictionKeepsLocks: with maxmemory-policy noeviction (Redis's
// default) a full Redis refuses new acquisitions with its OOM error,
// writing nothing, while a held lock is kept by its watchdog and released.
func TestNoEvictionKeepsLocks(t *testing.T) {
	rdb := server(t, "--maxmemory", "4mb", "--maxmemory-policy", "noeviction")
	a := newClient(t, rdb, dlock.Config{TTL: 900 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	held, err := a.Mutex("full").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = fill(t, rdb, func() bool { return false })
	if err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Fatalf("filling Redis: %v, want its OOM error", err)
	}
	keys := rdb.DBSize(ctx).Val()
	_, err = a.Mutex("other").Acquire(ctx, dlock.Wait(0))
	if err == nil || !strings.Contains(err.Error(), "OOM") || errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Acquire on a full Redis: %v, want Redis's OOM error (not a busy lock)", err)
	}
	t.Logf("Acquire on a full Redis: %v", err)
	if n := rdb.DBSize(ctx).Val(); n != keys {
		t.Fatalf("a refused Acquire changed the key count %d -> %d", keys, n)
	}
	// Three watchdog timeouts: the renewals go on in a full Redis.
	select {
	case <-held.Done():
		t.Fatalf("the held lock was lost in a full Redis: %v", held.Err())
	case <-time.After(3 * a.TTL()):
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("Unlock in a full Redis: %v", err)
	}
}
