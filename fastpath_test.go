package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/redis/go-redis/v9"
)

// queuedShapes are the shapes with a waiter queue and the uncontended fast
// path, with the most Redis commands (script calls included, as INFO
// commandstats counts them) one acquire+release pair may cost.
func queuedShapes(c *dlock.Client, name string) []struct {
	shape string
	lk    dlock.Locker
	cmds  int64
} {
	return []struct {
		shape string
		lk    dlock.Locker
		cmds  int64
	}{
		{"mutex", c.Mutex(name), 6},
		{"lock", c.Lock(name), 8},
		{"fair", c.FairLock(name), 9},
	}
}

// allCommandCalls returns the calls of every command the server has run (INFO
// commandstats; commands run by scripts included).
func allCommandCalls(t testing.TB, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		_, rest, ok := strings.Cut(line, ":calls=")
		if !ok || !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info:") {
			continue
		}
		v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		n += v
	}
	return n
}

// An uncontended acquire+release costs two script calls and at most
// shape.cmds Redis commands in all, and leaves no key but the fence counter.
func TestUncontendedCommands(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	ctx := context.Background()
	for _, tc := range queuedShapes(c, "fast") {
		t.Run(tc.shape, func(t *testing.T) {
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			const pairs = 50
			// the first pair sets the fence counter's floor: not counted
			l, err := tc.lk.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			before, calls := allCommandCalls(t, rdb), scriptCalls(t, rdb)
			last := l.Token()
			for range pairs {
				l, err := tc.lk.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if l.Token() <= last {
					t.Fatalf("token %d after %d", l.Token(), last)
				}
				last = l.Token()
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// the INFO call between the two readings counts once
			cmds := allCommandCalls(t, rdb) - before - 1
			if per := float64(cmds) / pairs; per > float64(tc.cmds) {
				t.Errorf("%.1f Redis commands per pair, want at most %d", per, tc.cmds)
			}
			if n := scriptCalls(t, rdb) - calls; n != 2*pairs {
				t.Errorf("%d script calls for %d pairs, want %d", n, pairs, 2*pairs)
			}
			keys, err := rdb.Keys(ctx, "*").Result()
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != 1 || keys[0] != dlock.FenceKey("fast") {
				t.Errorf("keys left: %v, want the fence counter alone", keys)
			}
		})
	}
}

// tokenAhead reads the fence counter of the name "lost".
func tokenAhead(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	n, err := rdb.Get(context.Background(), dlock.FenceKey("lost")).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Tokens strictly increase per name when the fence counter is lost between
// grants (deleted, FLUSHALL), when it went back (a failover that lost the
// last writes), when it is ahead of the clock, and after a lease ran out.
func TestTokenAfterCounterLost(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	ctx := context.Background()
	for _, tc := range queuedShapes(c, "lost") {
		t.Run(tc.shape, func(t *testing.T) {
			var last int64
			next := func(what string, opts ...dlock.Option) *dlock.Lease {
				t.Helper()
				l, err := tc.lk.Acquire(ctx, opts...)
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				if l.Token() <= last {
					t.Fatalf("%s: token %d, not above the earlier %d", what, l.Token(), last)
				}
				last = l.Token()
				return l
			}
			for i := range 5 {
				_ = next(fmt.Sprint("round ", i)).Unlock(ctx)
				if err := rdb.Del(ctx, dlock.FenceKey("lost")).Err(); err != nil {
					t.Fatal(err)
				}
				_ = next(fmt.Sprint("after the counter was deleted, round ", i)).Unlock(ctx)
				if err := rdb.FlushAll(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				_ = next(fmt.Sprint("after FLUSHALL, round ", i)).Unlock(ctx)
				// a failover that lost the last writes: the counter went back
				if err := rdb.Set(ctx, dlock.FenceKey("lost"), strconv.FormatInt(last-1000, 10), 0).Err(); err != nil {
					t.Fatal(err)
				}
				_ = next(fmt.Sprint("after the counter went back, round ", i)).Unlock(ctx)
			}

			// a lease that runs out, then the counter too
			l := next("short lease", dlock.LeaseTime(30*time.Millisecond))
			if !closedWithin(l.Done(), 5*time.Second) {
				t.Fatal("the short lease was not lost")
			}
			eventually(t, 5*time.Second, "the expired key is gone", func() bool {
				return rdb.Exists(ctx, "dlock:{lost}").Val() == 0
			})
			_ = next("after the lease ran out").Unlock(ctx)
			l = next("short lease again", dlock.LeaseTime(30*time.Millisecond))
			if err := rdb.Del(ctx, dlock.FenceKey("lost")).Err(); err != nil {
				t.Fatal(err)
			}
			// the holder's lease still runs: the next grant waits for it
			_ = next("after the lease ran out and the counter was deleted", dlock.Wait(5*time.Second)).Unlock(ctx)
			if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
				t.Fatalf("unlock of the expired lease: %v, want ErrLockLost", err)
			}
			// a counter ahead of the clock (an earlier burst, or a clock that went back)
			if err := rdb.Set(ctx, dlock.FenceKey("lost"), strconv.FormatInt(last+1_000_000_000, 10), 0).Err(); err != nil {
				t.Fatal(err)
			}
			ahead := next("counter ahead of the clock")
			info, err := c.Inspect(ctx, "lost")
			if err != nil || len(info.Holders) != 1 || info.Holders[0].Fence != ahead.Token() {
				t.Fatalf("counter ahead of the clock: the lock holds %+v (%v), want the token %d", info.Holders, err, ahead.Token())
			}
			_ = ahead.Unlock(ctx)
			if last != tokenAhead(t, rdb) {
				t.Fatalf("token %d, counter %d: the counter does not hold the last token", last, tokenAhead(t, rdb))
			}
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// marked reports whether the lock key of name carries the waiters mark.
func marked(t *testing.T, rdb *redis.Client, name string) bool {
	t.Helper()
	ctx := context.Background()
	key := "dlock:{" + name + "}"
	switch typ := rdb.Type(ctx, key).Val(); typ {
	case "string":
		v := rdb.Get(ctx, key).Val()
		return len(v) > 32 && v[32] == '+'
	case "hash":
		return rdb.HGet(ctx, key, "w").Val() == "1"
	case "none":
		return false
	default:
		t.Fatalf("lock key of type %s", typ)
		return false
	}
}

// The waiters mark: absent on an uncontended grant, set as soon as a waiter
// queues, kept by a hand-off, and gone with the key once nobody waits; the
// waiter gets the lock handed over at the holder's release (not by its retry
// timer: the holder's lease is the 30 s watchdog one).
func TestWaitersMark(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	for i, shape := range []string{"mutex", "lock", "fair"} {
		name := fmt.Sprint("mark", i)
		tc := queuedShapes(a, name)[i]
		waiterLk := queuedShapes(b, name)[i].lk
		t.Run(shape, func(t *testing.T) {
			l, err := tc.lk.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if marked(t, rdb, name) {
				t.Fatal("an uncontended grant is marked")
			}
			got := make(chan *dlock.Lease, 1)
			go func() {
				w, err := waiterLk.Acquire(ctx, dlock.Wait(10*time.Second))
				if err != nil {
					t.Error(err)
				}
				got <- w
			}()
			eventually(t, 5*time.Second, "the waiter queued", func() bool { return zcard(rdb, "dlock:{"+name+"}:queue") == 1 })
			if !marked(t, rdb, name) {
				t.Fatal("held with a waiter queued, but not marked")
			}
			released := time.Now()
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			var w *dlock.Lease
			select {
			case w = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the waiter was not handed the lock")
			}
			if w == nil {
				return
			}
			if d := time.Since(released); d > 2*time.Second {
				t.Errorf("handed over %v after the release: woken by its timer, not the release", d)
			}
			if w.Token() <= l.Token() {
				t.Errorf("hand-off token %d not above %d", w.Token(), l.Token())
			}
			if !marked(t, rdb, name) {
				t.Error("a hand-off is not marked")
			}
			if err := w.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"", ":queue", ":timeouts"} {
				if rdb.Exists(ctx, "dlock:{"+name+"}"+k).Val() != 0 {
					t.Errorf("key %q left after the last release", k)
				}
			}
			// the next uncontended grant starts unmarked
			l2, err := tc.lk.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if marked(t, rdb, name) {
				t.Error("a grant after the waiters left is marked")
			}
			_ = l2.Unlock(ctx)
		})
	}
}

// A lease ran out with a waiter queued and another caller took the free lock
// unmarked: the waiter's next attempt marks it again, and the release then
// hands it over.
func TestWaitersMarkRestored(t *testing.T) {
	rdb := server(t)
	a, b, c := newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	for i, shape := range []string{"mutex", "lock"} {
		name := fmt.Sprint("restored", i)
		pick := func(cl *dlock.Client) dlock.Locker { return queuedShapes(cl, name)[i].lk }
		if _, err := pick(a).Acquire(ctx, dlock.LeaseTime(300*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		got := make(chan *dlock.Lease, 1)
		go func() {
			w, err := pick(b).Acquire(ctx, dlock.Wait(10*time.Second), dlock.QueueTimeout(600*time.Millisecond))
			if err != nil {
				t.Error(err)
			}
			got <- w
		}()
		eventually(t, 5*time.Second, shape+": the waiter queued", func() bool { return zcard(rdb, "dlock:{"+name+"}:queue") == 1 })
		// Take the lock the moment the first lease runs out, past the
		// waiter's own retry at that moment if it loses the race.
		var barger *dlock.Lease
		for barger == nil {
			l, err := pick(c).Acquire(ctx, dlock.Wait(0))
			switch {
			case err == nil:
				barger = l
			case !errors.Is(err, dlock.ErrNotAcquired):
				t.Fatal(err)
			default:
				select {
				case w := <-got: // the waiter won the race: nothing to test this round
					if w != nil {
						_ = w.Unlock(ctx)
					}
					t.Logf("%s: the waiter took the expired lock first", shape)
					barger = nil
				default:
					time.Sleep(time.Millisecond)
					continue
				}
			}
			break
		}
		if barger == nil {
			continue
		}
		eventually(t, 5*time.Second, shape+": the waiter marked the lock again", func() bool { return marked(t, rdb, name) })
		released := time.Now()
		if err := barger.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case w := <-got:
			if w == nil {
				t.Fatal("the waiter got no lock")
			}
			if d := time.Since(released); d > time.Second {
				t.Errorf("%s: handed over %v after the release", shape, d)
			}
			_ = w.Unlock(ctx)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the waiter was not handed the lock", shape)
		}
	}
}

// A MultiLock waiting on a member held as a Lock marks it, so the Lock's
// release wakes the MultiLock at once (not at the end of the Lock's lease).
func TestMultiLockWokenByLockRelease(t *testing.T) {
	rdb := server(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	l, err := a.Lock("m1").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		m, err := b.MultiLock("m1", "m2").Acquire(ctx, dlock.Wait(20*time.Second))
		if err == nil {
			err = m.Unlock(ctx)
		}
		got <- err
	}()
	eventually(t, 5*time.Second, "the MultiLock marked the Lock", func() bool { return marked(t, rdb, "m1") })
	released := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(released); d > 3*time.Second {
			t.Errorf("the MultiLock got the lock %v after the release", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the MultiLock was not woken by the Lock's release")
	}
}

// A Lock after a MultiLock on one of its names gets a larger token than the
// MultiLock's (the largest of its members').
func TestLockTokenAfterMultiLock(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	ctx := context.Background()
	// the second member's counter runs ahead of the first's
	for range 3 {
		l, err := c.Lock("t2").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Unlock(ctx)
	}
	m, err := c.MultiLock("t1", "t2").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = m.Unlock(ctx)
	for _, lk := range []dlock.Locker{c.Lock("t1"), c.Lock("t2")} {
		l, err := lk.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= m.Token() {
			t.Errorf("%s: token %d not above the MultiLock's %d", l.Name(), l.Token(), m.Token())
		}
		_ = l.Unlock(ctx)
	}
}

// Fresh names leave no key per name: after 20 000 names, each acquired and
// released once, Redis keeps only the fence counters of the hash slots they
// fell in (at most 16384 keys, whatever the number of names), without a
// TTL; and the tokens of one slot, so of every name, went on increasing.
func TestFenceCountersBounded(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	ctx := context.Background()
	const names = 20000
	tokens := make([]int64, names)
	together(16, func(w int) {
		for i := w; i < names; i += 16 {
			l, err := c.Mutex("order:"+strconv.Itoa(i)).Acquire(ctx, dlock.Wait(0))
			if err != nil {
				t.Error(err)
				return
			}
			tokens[i] = l.Token()
			if err := l.Unlock(ctx); err != nil {
				t.Error(err)
				return
			}
		}
	})
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 16384 {
		t.Fatalf("%d keys after %d names: more than one per hash slot", len(keys), names)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "dlock:fence:{") {
			t.Fatalf("key %q left after every lock was released", k)
		}
		if ttl := rdb.PTTL(ctx, k).Val(); ttl != -1 {
			t.Fatalf("fence counter %s has a TTL of %v", k, ttl)
		}
	}
	// The same names again: each token above the name's first.
	for i := 0; i < names; i += 97 {
		l, err := c.Mutex("order:"+strconv.Itoa(i)).Acquire(ctx, dlock.Wait(0))
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= tokens[i] {
			t.Errorf("order:%d: token %d after %d", i, l.Token(), tokens[i])
		}
		_ = l.Unlock(ctx)
	}
	t.Logf("%d names left %d keys", names, len(keys))
}
