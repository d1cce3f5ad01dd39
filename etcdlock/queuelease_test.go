package etcdlock

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

// With QueueTimeout shorter than the session's TTL, a waiting key keeps
// its place (its create revision) on a lease of its own, and is back on the
// session, that lease revoked, once granted; a waiter granted at once and a
// QueueTimeout no shorter than the TTL never use one.
func TestQueueLease(t *testing.T) {
	admin := etcdClient(t)
	a, b := newClient(t), newClient(t, Config{TTL: 5 * time.Second})
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	dir := a.dir("mutex", n)
	free, err := b.Mutex(n).Acquire(ctx, dlock.QueueTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if ks := keysIn(t, admin, dir); len(ks) != 1 || ks[0].lease != b.sessionID() {
		t.Fatalf("a grant without waiting: keys %v, want one on the session", ks)
	}
	if err := free.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	held, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := b.Mutex(n).Acquire(ctx, dlock.QueueTimeout(time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	ks := awaitKeys(t, admin, dir, "the waiter on a lease of its own", func(ks []*keyInfo) bool {
		return len(ks) == 2 && ks[1].lease != 0 && ks[1].lease != b.sessionID()
	})
	waiting := ks[1]
	if !leaseAlive(t, admin, waiting.lease) {
		t.Fatal("the queue lease is gone")
	}
	time.Sleep(2500 * time.Millisecond) // past the queue lease's TTL: kept alive
	if now := keysIn(t, admin, dir); len(now) != 2 || now[1].rev != waiting.rev {
		t.Fatalf("the waiter lost its place while it waited: keys %v, were %v", now, ks)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		return
	}
	if l.Token() != waiting.rev {
		t.Errorf("granted token %d, the waiting key's revision %d", l.Token(), waiting.rev)
	}
	if now := keysIn(t, admin, dir); len(now) != 1 || now[0].lease != b.sessionID() {
		t.Fatalf("granted: keys %v, want the key on the session", now)
	}
	deadline := time.Now().Add(5 * time.Second)
	for leaseAlive(t, admin, waiting.lease) {
		if time.Now().After(deadline) {
			t.Fatal("the queue lease outlived the grant")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// QueueTimeout no shorter than the session's TTL: the session it is.
	held, err = a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = b.Mutex(n).Acquire(wctx, dlock.QueueTimeout(5*time.Second)) }()
	awaitKeys(t, admin, dir, "a waiter", func(ks []*keyInfo) bool { return len(ks) == 2 })
	time.Sleep(200 * time.Millisecond)
	if ks := keysIn(t, admin, dir); len(ks) != 2 || ks[1].lease != b.sessionID() {
		t.Fatalf("QueueTimeout = TTL: keys %v, want the waiter on the session", ks)
	}
	cancel()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Key names are reused: a Client that takes one lock over and over writes
// one key name (etcd keeps every name ever written in its index until a
// compaction, and a read of the directory walks them all); a name held or
// waiting is not reused meanwhile.
func TestKeyNamesReused(t *testing.T) {
	admin := etcdClient(t)
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	dir := c.dir("mutex", n)
	names := map[string]bool{}
	for range 20 {
		l, err := c.Mutex(n).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		names[l.ID()] = true
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(names) != 1 {
		t.Fatalf("20 acquisitions one after another wrote %d key names, want 1", len(names))
	}
	l1, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Mutex(n).Acquire(wctx)
	}()
	ks := awaitKeys(t, admin, dir, "a waiter", func(ks []*keyInfo) bool { return len(ks) == 2 })
	if !names[ks[0].key] || names[ks[1].key] {
		t.Errorf("keys %v: want the holder on the reused name and the waiter on another", ks)
	}
	cancel()
	<-done
	if err := l1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !names[l2.ID()] {
		t.Errorf("after the waiter left: %s, want the first name again", l2.ID())
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
