package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A reentrant hold is one hold: a loss any Lease finds ends every Lease of
// the owner, and re-entries write nothing to etcd.
func TestReentryJoinsHold(t *testing.T) {
	admin := etcdClient(t)
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	n := lockName(t)
	outer, err := c.Lock(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rev := func() int64 {
		resp, err := admin.Get(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	before := rev()
	inner, err := c.Lock(n).Acquire(outer.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if r := rev(); r != before {
		t.Errorf("a re-entry wrote to etcd (revision %d to %d)", before, r)
	}
	if inner.ID() != outer.ID() || inner.Token() != outer.Token() {
		t.Fatalf("re-entry %s/%d, outer %s/%d", inner.ID(), inner.Token(), outer.ID(), outer.Token())
	}
	if _, err := admin.Delete(ctx, outer.ID()); err != nil {
		t.Fatal(err)
	}
	if err := inner.Verify(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Verify of a deleted lock: %v, want ErrLockLost", err)
	}
	select {
	case <-outer.Done():
	case <-time.After(time.Second):
		t.Fatal("the outer Lease was not told when the inner one found the loss")
	}
	if err := outer.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("outer Unlock: %v, want ErrLockLost", err)
	}
	// The owner takes the lock afresh.
	again, err := c.Lock(n).Acquire(context.WithoutCancel(outer.Context()), dlock.Wait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if again.Token() <= outer.Token() {
		t.Fatalf("fresh grant token %d after %d", again.Token(), outer.Token())
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A holder whose key is deleted behind its back is told at the next
// renewal, without calling Verify.
func TestDeletedKeySeenByRenewal(t *testing.T) {
	admin := etcdClient(t)
	c := newClient(t, Config{TTL: 2 * time.Second})
	ctx := testCtx(t, 20*time.Second)
	l, err := c.Mutex(lockName(t)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctx, l.ID()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a deleted lock was not reported by the renewals")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err: %v", err)
	}
}

func TestRWDowngradeAndUpgrade(t *testing.T) {
	a, b := newClient(t), newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	w, err := a.RWLock(n).WriteLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.RWLock(n).ReadLock().Acquire(context.WithoutCancel(w.Context()), dlock.Wait(0))
	if err != nil {
		t.Fatalf("downgrade: %v", err)
	}
	if r.Token() <= w.Token() {
		t.Errorf("read token %d not above the write token %d", r.Token(), w.Token())
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := b.RWLock(n).WriteLock().Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(200 * time.Millisecond) // the writer queues behind the write lock
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-got:
		t.Fatal("a writer got in between the downgrade's write unlock and its read")
	case <-time.After(500 * time.Millisecond):
	}
	// Holding read only now: asking for write is refused at once.
	if _, err := a.RWLock(n).WriteLock().Acquire(r.Context()); !errors.Is(err, dlock.ErrUpgrade) {
		t.Fatalf("upgrade: %v, want ErrUpgrade", err)
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l != nil {
			if l.Token() <= r.Token() {
				t.Errorf("writer token %d after reader %d", l.Token(), r.Token())
			}
			_ = l.Unlock(ctx)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer never got the lock after the read side was unlocked")
	}
}

// A waiting writer holds back readers that come after it.
func TestRWWriterPreference(t *testing.T) {
	admin := etcdClient(t)
	a, b, c := newClient(t), newClient(t), newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	r1, err := a.RWLock(n).ReadLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := b.RWLock(n).WriteLock().Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	awaitKeys(t, admin, a.dir("rw", n)+"w/", "the waiting writer", func(ks []*keyInfo) bool { return len(ks) == 1 })
	if _, err := c.RWLock(n).ReadLock().Acquire(ctx, dlock.Wait(300*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a reader after a waiting writer: %v, want ErrNotAcquired", err)
	}
	if err := r1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if w := <-got; w != nil {
		_ = w.Unlock(ctx)
	}
}

// Uncontended, an acquisition and its release are two writes to the
// cluster (Raft proposals), once the Client's session exists.
func TestUncontendedWrites(t *testing.T) {
	cli := etcdClient(t)
	c, err := New(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testCtx(t, 20*time.Second)
	n := lockName(t)
	warm, err := c.Mutex(n + ".warm").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The revision counts the writes to the key space; the proposals
	// metric, every Raft write (lease grants and revokes too) — of every
	// test sharing the server, so it is read as a bound.
	m := server.Members[0]
	p0, err := m.Metric(ctx, "etcd_server_proposals_committed_total")
	if err != nil {
		t.Fatal(err)
	}
	r0, err := cli.Get(ctx, "x", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	r1, err := cli.Get(ctx, "x", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	p1, err := m.Metric(ctx, "etcd_server_proposals_committed_total")
	if err != nil {
		t.Fatal(err)
	}
	if d := r1.Header.Revision - r0.Header.Revision; d != 2 {
		t.Errorf("acquire + release moved the revision by %d, want 2", d)
	}
	if d := p1 - p0; d < 2 {
		t.Errorf("%v proposals committed for acquire + release, want at least 2", d)
	} else {
		t.Logf("%v proposals committed during acquire + release (2 are ours)", d)
	}
}

// Close ends the waits in progress with ErrClosed.
func TestCloseEndsWaits(t *testing.T) {
	a, b := newClient(t), newClient(t)
	ctx := testCtx(t, 20*time.Second)
	n := lockName(t)
	held, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.Mutex(n).Acquire(ctx)
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("a wait ended by Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the wait")
	}
}

// Two acquisitions of one Lock by one owner at once (two goroutines under
// one Context) do not queue behind each other: the second waits for the
// first and joins its hold.
func TestReentryRacesJoin(t *testing.T) {
	a, b := newClient(t), newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	carrier, err := a.Lock(n + ".owner").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer carrier.Unlock(ctx)
	held, err := b.Lock(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 2)
	for range 2 {
		go func() {
			l, err := a.Lock(n).Acquire(carrier.Context(), dlock.Wait(10*time.Second))
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
	}
	time.Sleep(200 * time.Millisecond) // both wait: one in etcd, one for it
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l1, l2 := <-got, <-got
	if l1 == nil || l2 == nil {
		return
	}
	if l1.Token() != l2.Token() || l1.ID() != l2.ID() {
		t.Fatalf("one owner's two acquisitions: %s/%d and %s/%d, want one hold", l1.ID(), l1.Token(), l2.ID(), l2.Token())
	}
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Lock(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("free after one of two Unlocks: %v", err)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := b.Lock(n).Acquire(ctx, dlock.Wait(5*time.Second)); err != nil {
		t.Fatal(err)
	} else {
		_ = l.Unlock(ctx)
	}
}
