package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/etcdproc"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The lock-delay (lockdelay.go): when etcd ends a hold early — here its
// session lease revoked from outside, as a resumed leader does on its own
// (TestEarlyRevokeHazard) — nobody is granted the lock before its holder
// is told.

// delayCase is one shape of lock as the lock-delay tests take it: the
// holder's and the next acquirer's lockers, and the directory where both
// keys show once the acquirer waits.
type delayCase struct {
	name           string
	holder, waiter func(c *Client, n string) dlock.Locker
	dir            func(c *Client, n string) string
}

var delayCases = []delayCase{
	{"mutex", mutexOf, mutexOf, dirOf("mutex")},
	{"lock", lockOf, lockOf, dirOf("lock")},
	{"write-after-write", writeOf, writeOf, dirOf("rw")},
	{"read-after-write", writeOf, readOf, dirOf("rw")},
	{"write-after-read", readOf, writeOf, dirOf("rw")},
	{"semaphore", semOf, semOf, dirOf("semaphore")},
	{"lock-after-multilock", func(c *Client, n string) dlock.Locker { return c.MultiLock(n+".b", n) }, lockOf, dirOf("lock")},
}

func mutexOf(c *Client, n string) dlock.Locker { return c.Mutex(n) }
func lockOf(c *Client, n string) dlock.Locker  { return c.Lock(n) }
func writeOf(c *Client, n string) dlock.Locker { return c.RWLock(n).WriteLock() }
func readOf(c *Client, n string) dlock.Locker  { return c.RWLock(n).ReadLock() }
func semOf(c *Client, n string) dlock.Locker   { return c.Semaphore(n, 1) }
func dirOf(kind string) func(c *Client, n string) string {
	return func(c *Client, n string) string { return c.dir(kind, n) }
}

// cutOffHolder returns a Client whose etcd client goes through a proxy,
// and the proxy.
func cutOffHolder(t *testing.T, ttl time.Duration) (*Client, *etcdproc.Proxy) {
	t.Helper()
	p, err := etcdproc.NewProxy(server.Members[0].ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return newClientOn(t, etcdClient(t, p.Endpoint()), Config{TTL: ttl}), p
}

// behind is what an Acquire made behind a holder got, and the holder's
// Err at that moment.
type behind struct {
	l       *dlock.Lease
	err     error
	at      time.Time
	heldErr error
}

// acquireBehind acquires lk (waiting up to wait) in the background, and
// reports what it got, with held's Err when it returned.
func acquireBehind(ctx context.Context, lk dlock.Locker, held *dlock.Lease, wait time.Duration) <-chan behind {
	got := make(chan behind, 1)
	go func() {
		l, err := lk.Acquire(ctx, dlock.Wait(wait))
		got <- behind{l, err, time.Now(), held.Err()}
	}()
	return got
}

// awaitQueued waits until dir has a key besides the holder's.
func awaitQueued(t *testing.T, cli *clientv3.Client, dir string) {
	t.Helper()
	awaitKeys(t, cli, dir, "the waiter's key", func(ks []*keyInfo) bool { return len(ks) >= 2 })
}

// TestLockDelayHolderCutOff: the holder's session lease is revoked from
// outside while the holder is cut off from etcd (a proxy that stops
// forwarding), so that only its own clock can tell it. A waiter queued
// behind it, or an Acquire made 100 ms after the revoke, is granted the
// lock only once the holder's Err says it lost it. Without the lock-delay
// the waiter was granted 2-6 ms after the revoke, the holder told up to
// its keep later.
func TestLockDelayHolderCutOff(t *testing.T) {
	admin := etcdClient(t)
	for _, tc := range delayCases {
		for _, queued := range []bool{true, false} {
			mode := "fresh-100ms-after"
			if queued {
				mode = "queued"
			}
			t.Run(tc.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				ctx := testCtx(t, 60*time.Second)
				a, p := cutOffHolder(t, 3*time.Second)
				b := newClient(t, Config{TTL: 3 * time.Second})
				n := lockName(t)
				held, err := tc.holder(a, n).Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var got <-chan behind
				if queued {
					got = acquireBehind(ctx, tc.waiter(b, n), held, 30*time.Second)
					awaitQueued(t, admin, tc.dir(a, n))
				}
				keep := a.keepFor()
				p.Cut()
				revoke(t, admin, a.sessionID())
				revoked := time.Now()
				if !queued {
					time.Sleep(100 * time.Millisecond)
					got = acquireBehind(ctx, tc.waiter(b, n), held, 30*time.Second)
				}
				r := <-got
				if r.err != nil {
					t.Fatalf("the next acquirer after the revoke: %v", r.err)
				}
				if !errors.Is(r.heldErr, dlock.ErrLockLost) {
					t.Fatalf("granted %v after the revoke while the cut-off holder still held (Err %v)", r.at.Sub(revoked), r.heldErr)
				}
				if r.l.Token() <= held.Token() {
					t.Fatalf("token %d after %d", r.l.Token(), held.Token())
				}
				t.Logf("granted %v after the revoke; the holder (keep %v) was told first",
					r.at.Sub(revoked).Round(time.Millisecond), keep)
				p.Heal()
				if err := held.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
					t.Fatalf("the revoked holder's Unlock: %v, want ErrLockLost", err)
				}
				if err := r.l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				// Nothing is left: the waiter deleted the orphan mark it
				// waited for, its release its own key and mark.
				awaitKeys(t, admin, a.markOf(tc.dir(a, n)), "no marks", func(ks []*keyInfo) bool { return len(ks) == 0 })
			})
		}
	}
}

// TestLockDelayToldHolder: a holder that is still connected when its
// lease is revoked is told at its next keepalive, and its Client then
// lets the next acquirer in at once: with a lock-delay of a minute the
// waiter is granted within a few seconds, after the holder was told.
func TestLockDelayToldHolder(t *testing.T) {
	admin := etcdClient(t)
	ctx := testCtx(t, 30*time.Second)
	a, b := newClient(t, Config{TTL: 3 * time.Second}), newClient(t, Config{TTL: 3 * time.Second})
	n := lockName(t)
	held, err := a.Mutex(n).Acquire(ctx, dlock.LockDelay(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := acquireBehind(ctx, b.Mutex(n), held, 20*time.Second)
	awaitQueued(t, admin, a.dir("mutex", n))
	revoke(t, admin, a.sessionID())
	revoked := time.Now()
	r := <-got
	if r.err != nil {
		t.Fatalf("the waiter: %v (the holder's Client never let it in)", r.err)
	}
	if !errors.Is(r.heldErr, dlock.ErrLockLost) {
		t.Fatalf("granted while the holder still held (Err %v)", r.heldErr)
	}
	t.Logf("granted %v after the revoke (keepalive every %v)", r.at.Sub(revoked).Round(time.Millisecond), time.Second)
	if err := r.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockDelayUnlockHandsOff: an Unlock hands the lock on at once, whatever
// the lock-delay (a minute here, which the waiter's 10 s wait could not sit
// out): a release removes the holder's mark with its key.
func TestLockDelayUnlockHandsOff(t *testing.T) {
	admin := etcdClient(t)
	ctx := testCtx(t, 30*time.Second)
	for _, tc := range delayCases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := newClient(t), newClient(t)
			n := lockName(t)
			held, err := tc.holder(a, n).Acquire(ctx, dlock.LockDelay(time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			got := acquireBehind(ctx, tc.waiter(b, n), held, 10*time.Second)
			awaitQueued(t, admin, tc.dir(a, n))
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			r := <-got
			if r.err != nil {
				t.Fatalf("the waiter after an Unlock: %v", r.err)
			}
			if err := r.l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			awaitKeys(t, admin, a.markOf(tc.dir(a, n)), "no marks", func(ks []*keyInfo) bool { return len(ks) == 0 })
		})
	}
}

// TestLockDelayZero: LockDelay(0) is etcd's own behaviour: the waiter is
// granted as soon as the lease is revoked, while the cut-off holder still
// believes it holds (it writes no mark).
func TestLockDelayZero(t *testing.T) {
	admin := etcdClient(t)
	ctx := testCtx(t, 30*time.Second)
	a, p := cutOffHolder(t, 10*time.Second)
	b := newClient(t)
	n := lockName(t)
	held, err := a.Mutex(n).Acquire(ctx, dlock.LockDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	if ks := keysIn(t, admin, a.markOf(a.dir("mutex", n))); len(ks) != 0 {
		t.Fatalf("LockDelay(0) wrote marks: %v", ks)
	}
	got := acquireBehind(ctx, b.Mutex(n), held, 20*time.Second)
	awaitQueued(t, admin, a.dir("mutex", n))
	p.Cut()
	revoke(t, admin, a.sessionID())
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.heldErr != nil {
		t.Fatalf("the holder was told (%v) before the grant: LockDelay(0) should change nothing", r.heldErr)
	}
	if err := r.l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLockDelayBadInput: a negative LockDelay is refused, writing nothing.
func TestLockDelayBadInput(t *testing.T) {
	c := newClient(t)
	n := lockName(t)
	if _, err := c.Mutex(n).Acquire(testCtx(t, 10*time.Second), dlock.LockDelay(-time.Second)); !errors.Is(err, dlock.ErrInvalidDuration) {
		t.Fatalf("LockDelay(-1s): %v, want ErrInvalidDuration", err)
	}
	admin := etcdClient(t)
	for _, dir := range []string{c.dir("mutex", n), c.markOf(c.dir("mutex", n))} {
		if ks := keysIn(t, admin, dir); len(ks) != 0 {
			t.Fatalf("a refused Acquire wrote %v", ks)
		}
	}
}

// TestOrphanSweep: the holder's process is killed and nobody acquires its
// lock again; the first Client to start a session after its lease ended
// finds the mark it left and deletes it once the lock-delay has passed.
func TestOrphanSweep(t *testing.T) {
	admin := etcdClient(t)
	n := lockName(t)
	probe := &Client{prefix: DefaultPrefix}
	marks := probe.markOf(probe.dir("mutex", n))
	stop := startHolderProcess(t, n)
	if ks := keysIn(t, admin, marks); len(ks) != 1 {
		t.Fatalf("the holder's mark: %v, want one", ks)
	}
	stop()
	killed := time.Now()
	// Its session lease (TTL 2 s) ends; the mark stays.
	awaitKeys(t, admin, probe.dir("mutex", n), "the killed holder's key gone", func(ks []*keyInfo) bool { return len(ks) == 0 })
	if ks := keysIn(t, admin, marks); len(ks) != 1 {
		t.Fatalf("the killed holder's mark: %v, want it left", ks)
	}
	c := newClient(t)
	if l, err := c.Mutex(n + ".other").Acquire(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	} else if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	awaitKeys(t, admin, marks, "the orphan mark swept", func(ks []*keyInfo) bool { return len(ks) == 0 })
	t.Logf("the orphan mark was swept %v after the kill", time.Since(killed).Round(time.Millisecond))
}
