package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/etcdproc"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/dlockgo/dlock/seam"
)

// Regression cases from etcd's own lock recipe (client/v3/concurrency).

// etcd-io/etcd#11456 (Jepsen, etcd 3.4.3): a waiter whose session lease
// expired while it waited must not report the lock held when the holder
// lets go. Here the waiter's lease is revoked and the holder unlocks at
// once: the waiter's grant must be backed by a live lease of its own.
func TestGrantAfterWaitRechecksSession(t *testing.T) {
	admin := etcdClient(t)
	a, b := newClient(t), newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	dir := a.dir("mutex", n)
	held, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := b.Mutex(n).Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	awaitKeys(t, admin, dir, "the waiter's key", func(ks []*keyInfo) bool { return len(ks) == 2 })
	old := b.sessionID()
	revoke(t, admin, old)
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		return
	}
	defer l.Unlock(ctx)
	ks := keysIn(t, admin, dir)
	if len(ks) != 1 || ks[0].key != l.ID() || ks[0].rev != l.Token() {
		t.Fatalf("granted %s (token %d), but etcd holds %v", l.ID(), l.Token(), ks)
	}
	if ks[0].lease == old {
		t.Fatal("the grant is on the revoked lease")
	}
	if !leaseAlive(t, admin, ks[0].lease) {
		t.Fatal("the grant's lease is gone")
	}
	if err := l.Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// etcd-io/etcd#22082: an Unlock sent again after its first reply was lost
// must not delete a later acquisition of the same lock by the same
// session. Every release is conditional on the key's create revision.
func TestRetriedUnlockSparesLaterAcquisition(t *testing.T) {
	for _, kind := range []string{"mutex", "lock"} {
		t.Run(kind, func(t *testing.T) {
			a, b := newClient(t), newClient(t)
			ctx := testCtx(t, 20*time.Second)
			n := lockName(t)
			get := func(c *Client) dlock.Locker {
				if kind == "mutex" {
					return c.Mutex(n)
				}
				return c.Lock(n)
			}
			first, err := get(a).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ops := opsOf(t, a, first)
			if err := first.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			// The same owner and session take the lock again.
			second, err := get(a).Acquire(context.WithoutCancel(first.Context()))
			if err != nil {
				t.Fatal(err)
			}
			// The first release, delivered again.
			if res, err := ops.Release(ctx); err != nil || res != seam.ReleasedNotOurs {
				t.Fatalf("the repeated release: %v, %v; want ReleasedNotOurs", res, err)
			}
			if err := second.Verify(ctx); err != nil {
				t.Fatalf("the later acquisition after the repeated release: %v", err)
			}
			if _, err := get(b).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("another client got the lock: %v", err)
			}
			if err := second.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// opsOf returns the grant operations of a lease of c.
func opsOf(t *testing.T, c *Client, l *dlock.Lease) *grantOps {
	t.Helper()
	h := c.keeper.HoldOf((*seam.Lease)(l))
	if h == nil {
		t.Fatalf("no hold for %s", l.ID())
	}
	return h.Ops()
}

// An Unlock whose request never reached etcd (the link was cut) is sent
// again in the background: the session keeps living, so without the retry
// the lock would stay held until the Client closed.
func TestFailedUnlockIsRetried(t *testing.T) {
	p, err := etcdproc.NewProxy(server.Members[0].ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	a, err := New(etcdClient(t, p.Endpoint()))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	l, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Cut()
	uctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = l.Unlock(uctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Unlock through a cut link: %v, want context.DeadlineExceeded", err)
	}
	if _, err := b.Mutex(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("the lock was free before the release got through: %v", err)
	}
	p.Heal()
	// Well inside the session TTL (10 s), which keeps the key otherwise.
	start := time.Now()
	got, err := b.Mutex(n).Acquire(ctx, dlock.Wait(8*time.Second))
	if err != nil {
		t.Fatalf("the retried release never freed the lock: %v", err)
	}
	t.Logf("freed %v after the link came back", time.Since(start).Round(time.Millisecond))
	if err := got.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The name of a key whose release went unanswered is never used again
	// by its Client (a delete etcd applied late must find nobody's key).
	again, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID() == l.ID() {
		t.Errorf("the key name %s was reused after its release went unanswered", l.ID())
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// etcd-io/etcd#16221 (recipe.RWMutex): a waiting writer whose lease is
// revoked must not let two writers in.
func TestRevokedWaitingWriterAdmitsNoSecondWriter(t *testing.T) {
	admin := etcdClient(t)
	a, b := newClient(t), newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	var w witness.Witness
	first, err := a.RWLock(n).WriteLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Enter(n)
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := b.RWLock(n).WriteLock().Acquire(ctx)
		if err != nil {
			t.Error(err)
			got <- nil
			return
		}
		w.Enter(n)
		got <- l
	}()
	dir := a.dir("rw", n)
	awaitKeys(t, admin, dir, "the waiting writer", func(ks []*keyInfo) bool { return len(ks) == 2 })
	old := b.sessionID()
	revoke(t, admin, old)
	// The waiter queues again on a new session, behind the holder.
	awaitKeys(t, admin, dir, "the writer queued again", func(ks []*keyInfo) bool {
		return len(ks) == 2 && ks[1].lease != old && ks[1].lease != 0
	})
	select {
	case l := <-got:
		t.Fatalf("a second writer got in while the first held the lock (%v)", l)
	case <-time.After(500 * time.Millisecond):
	}
	if err := first.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	w.Exit(n)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-got
	if second == nil {
		return
	}
	w.Exit(n)
	if o := w.Overlaps(); o != 0 {
		t.Fatalf("%d overlapping writers", o)
	}
	if err := second.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// etcd-io/etcd#19597: a waiter notices at once that its own key is gone
// (its session expired), not when the holder lets go: it queues again on
// a new session while the holder still holds.
func TestWaiterNoticesOwnExpiry(t *testing.T) {
	admin := etcdClient(t)
	a, b := newClient(t), newClient(t) // TTL 10 s: the keepalive would take 3.3 s to notice
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	dir := a.dir("mutex", n)
	held, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		l, err := b.Mutex(n).Acquire(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		done <- err
	}()
	awaitKeys(t, admin, dir, "the waiter's key", func(ks []*keyInfo) bool { return len(ks) == 2 })
	old := b.sessionID()
	revoked := time.Now()
	revoke(t, admin, old)
	ks := awaitKeys(t, admin, dir, "the waiter back in line", func(ks []*keyInfo) bool {
		return len(ks) == 2 && ks[1].lease != old && ks[1].lease != 0
	})
	if d := time.Since(revoked); d > 2*time.Second {
		t.Fatalf("the waiter took %v to notice its expiry", d)
	}
	if ks[0].key != held.ID() {
		t.Fatalf("the holder's key is not first: %v", ks)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
