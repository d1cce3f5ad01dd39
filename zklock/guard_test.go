package zklock

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
	"github.com/go-zookeeper/zk"
	"go.uber.org/goleak"
)

// firstNode returns the path of the first node in line in name's lock of
// family, as an operator listing it with zkCli would find it.
func firstNode(t *testing.T, c *Client, family, name string) string {
	t.Helper()
	q := queue(members(t, c, family, name))
	if len(q) == 0 {
		t.Fatalf("%s has no node", c.dir(family, name))
	}
	return c.dir(family, name) + "/" + q[0].name
}

// deletedOrTaken reports whether err is a loss for the reason
// observe.LostDeletedOrTaken.
func deletedOrTaken(err error) bool {
	return errors.Is(err, dlock.ErrLockLost) && strings.Contains(err.Error(), "("+string(observe.LostDeletedOrTaken)+")")
}

// TestDeletedHolderTold: a holder whose node another session deletes (an
// operator's zkCli delete) is told at once, without asking, whatever its
// shape or lease, and the waiter behind it gets the lock at once too (a
// semaphore's waiter watches the directory: a change between its listing
// and its watch must not leave it asleep). It logs how long after the
// delete request the holder was told (p50 and max of 24), and when the
// waiter was granted relative to that.
func TestDeletedHolderTold(t *testing.T) {
	const timeout = 3 * time.Second
	a, b, admin := dial(t, timeout), dial(t, timeout), dial(t, timeout)
	ctx := testCtx(t, 2*time.Minute)
	kinds := []struct {
		name   string
		family string
		hold   func(n string) dlock.Locker // a's
		wait   func(n string) dlock.Locker // b's, which must wait behind it
		opts   []dlock.Option
	}{
		{"mutex", "lock", func(n string) dlock.Locker { return a.Mutex(n) }, func(n string) dlock.Locker { return b.Mutex(n) }, nil},
		{"read", "lock", func(n string) dlock.Locker { return a.RWLock(n).ReadLock() }, func(n string) dlock.Locker { return b.RWLock(n).WriteLock() }, nil},
		{"semaphore", "semaphore", func(n string) dlock.Locker { return a.Semaphore(n, 1) }, func(n string) dlock.Locker { return b.Semaphore(n, 1) }, nil},
		{"fixed", "lock", func(n string) dlock.Locker { return a.Mutex(n) }, func(n string) dlock.Locker { return b.Mutex(n) },
			[]dlock.Option{dlock.LeaseTime(timeout)}},
	}
	var told, overlap []time.Duration
	for round := range 24 {
		k := kinds[round%len(kinds)]
		n := lockName(t)
		held, err := k.hold(n).Acquire(ctx, k.opts...)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan time.Time, 1)
		next := make(chan *dlock.Lease, 1)
		go func() {
			l, err := k.wait(n).Acquire(ctx)
			got <- time.Now()
			if err != nil {
				t.Error(err)
			}
			next <- l
		}()
		waitFor(t, func() bool { return len(members(t, admin, k.family, n)) == 2 })
		path := firstNode(t, admin, k.family, n)
		deleted := time.Now()
		if err := admin.conn.Delete(path, -1); err != nil {
			t.Fatal(err)
		}
		select {
		case <-held.Done():
		case <-time.After(time.Second):
			t.Fatalf("%s: the holder was not told within 1s that its node was deleted (Err %v)", k.name, held.Err())
		}
		toldAt := time.Now()
		if err := held.Err(); !deletedOrTaken(err) {
			t.Fatalf("%s: Err %v, want a loss for %s", k.name, err, observe.LostDeletedOrTaken)
		}
		grantedAt := <-got
		l := <-next
		if l == nil {
			return
		}
		if d := grantedAt.Sub(deleted); d > time.Second {
			t.Fatalf("%s: the waiter was granted %v after the delete", k.name, d)
		}
		told = append(told, toldAt.Sub(deleted))
		overlap = append(overlap, toldAt.Sub(grantedAt))
		if err := held.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
			t.Fatalf("%s: Unlock after the delete: %v, want ErrLockLost", k.name, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("%s: the waiter's Unlock: %v", k.name, err)
		}
	}
	slices.Sort(told)
	slices.Sort(overlap)
	t.Logf("told after the delete request: p50 %v, max %v (%d deletes); told minus the waiter's grant: min %v, p50 %v, max %v",
		told[len(told)/2], told[len(told)-1], len(told), overlap[0], overlap[len(overlap)/2], overlap[len(overlap)-1])
}

// TestFixedReentrantDeleted: a reentrant Lock with a fixed lease, entered
// twice and its newer Lease unlocked, is told through the older one when
// its node is deleted (a fixed lease is not in the Keeper's renewed list).
func TestFixedReentrantDeleted(t *testing.T) {
	a, admin := dial(t, 3*time.Second), dial(t, 3*time.Second)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	outer, err := a.Lock(n).Acquire(ctx, dlock.LeaseTime(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	inner, err := a.Lock(n).Acquire(outer.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := admin.conn.Delete(firstNode(t, admin, "lock", n), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-outer.Done():
	case <-time.After(time.Second):
		t.Fatalf("the outer Lease was not told within 1s that its node was deleted (Err %v)", outer.Err())
	}
	if err := outer.Err(); !deletedOrTaken(err) {
		t.Fatalf("Err %v, want a loss for %s", err, observe.LostDeletedOrTaken)
	}
}

// TestDeletedWhileDisconnected: the holder's connection is cut and its node
// deleted before it reconnects (in the same session). The server dropped
// the watch with the connection; the client sets it again on reconnecting,
// and even when that request is lost (the proxy swallows every
// SetWatches) the guard looks at its node again and tells the holder. For
// a client made by Dial the connection's events say it reconnected, for
// one made by New its heartbeat does.
func TestDeletedWhileDisconnected(t *testing.T) {
	const timeout = 6 * time.Second // the hold's deadline is >= 4s after the cut
	for _, made := range []string{"Dial", "New"} {
		for _, swallowed := range []bool{false, true} {
			t.Run(made+map[bool]string{false: "/SetWatchesSent", true: "/SetWatchesLost"}[swallowed], func(t *testing.T) {
				p := newProxy(t, server.Addr())
				a := clientVia(t, made, p.addr(), timeout)
				admin := dial(t, 3*time.Second)
				ctx := testCtx(t, 30*time.Second)
				n := lockName(t)
				held, err := a.Mutex(n).Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				p.waitReplies(opGetData, 1, 5*time.Second) // the guard's watch is set
				sid := a.conn.SessionID()
				p.refuse(true)
				p.cut()
				waitFor(t, func() bool { return a.conn.State() != zk.StateHasSession })
				if err := admin.conn.Delete(firstNode(t, admin, "lock", n), -1); err != nil {
					t.Fatal(err)
				}
				if swallowed {
					p.swallowRequests(opSetWatches)
				}
				p.refuse(false)
				back := time.Now()
				select {
				case <-held.Done():
				case <-time.After(4 * time.Second):
					t.Fatalf("the holder was not told its node was deleted while it was disconnected (Err %v)", held.Err())
				}
				if err := held.Err(); !deletedOrTaken(err) {
					t.Fatalf("Err %v, want a loss for %s", err, observe.LostDeletedOrTaken)
				}
				if now := a.conn.SessionID(); now != sid {
					t.Fatalf("the session changed (%x to %x): the test wants it kept", sid, now)
				}
				if swallowed && p.replyCount(opSetWatches) != 0 {
					t.Fatal("a SetWatches got through")
				}
				t.Logf("told %v after the proxy let the client back", time.Since(back))
			})
		}
	}
}

// clientVia returns a client connected through addr, made by Dial or by
// New on a connection of the test's own.
func clientVia(t *testing.T, made, addr string, timeout time.Duration) *Client {
	t.Helper()
	if made == "Dial" {
		return dialAddr(t, addr, timeout)
	}
	conn, _, err := zk.Connect([]string{addr}, timeout, zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(conn, Config{TTL: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		conn.Close()
	})
	return c
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// lostCounter counts the losses reported to it.
type lostCounter struct {
	mu   sync.Mutex
	lost []observe.LostEvent
}

func (o *lostCounter) ObserveAcquire(observe.AcquireEvent) {}
func (o *lostCounter) ObserveRelease(observe.ReleaseEvent) {}
func (o *lostCounter) ObserveRenewal(observe.RenewalEvent) {}
func (o *lostCounter) ObserveLost(e observe.LostEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lost = append(o.lost, e)
}

func (o *lostCounter) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.lost)
}

// TestGuardEnds: the holder's own Unlock deletes its node and fires its
// watch without reporting a loss, and every guard ends with its hold (or,
// for one never unlocked, with Close).
func TestGuardEnds(t *testing.T) {
	obs := &lostCounter{}
	a := dial(t, 3*time.Second, Config{Observer: obs})
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	// One round trip first: the connection's own goroutines start after
	// Dial returns.
	if _, _, err := a.conn.Exists("/"); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	for i := range 40 {
		var l *dlock.Lease
		var err error
		switch i % 4 {
		case 0:
			l, err = a.Mutex(n).Acquire(ctx)
		case 1:
			l, err = a.Lock(n).Acquire(ctx)
		case 2:
			l, err = a.RWLock(n).ReadLock().Acquire(ctx)
		default:
			l, err = a.Mutex(n).Acquire(ctx, dlock.LeaseTime(time.Second))
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// The client's idle request workers (tasks.Workers) are the client's,
	// not a hold's: they end with their idle time, or Close.
	if err := goleak.Find(before, goleak.IgnoreTopFunction("github.com/dlockgo/dlock/internal/tasks.(*Workers).work")); err != nil {
		t.Fatalf("goroutines left after 40 holds were unlocked: %v", err)
	}
	if c := obs.count(); c != 0 {
		t.Fatalf("%d losses reported for holds that were unlocked: %v", c, obs.lost)
	}
	kept, err := a.Mutex(lockName(t)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	if err := kept.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err after Close: %v", err)
	}
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after Close: %v", err)
	}
}

// waitFor waits until cond holds, failing t after 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
