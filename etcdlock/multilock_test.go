package etcdlock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// One transaction: a key under every name's Lock directory, all with the
// create revision that is the token; a refusal leaves none of them.
func TestMultiLockOneTransaction(t *testing.T) {
	admin := etcdClient(t)
	a, b := newClient(t), newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	names := []string{n + ".c", n + ".a", n + ".b"}
	r0, err := admin.Get(ctx, "x", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	l, err := a.MultiLock(names...).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		ks := keysIn(t, admin, a.dir("lock", name))
		if len(ks) != 1 || ks[0].rev != l.Token() || ks[0].lease != a.sessionID() {
			t.Fatalf("%s: keys %v, want one created at the token %d on the session", name, ks, l.Token())
		}
	}
	if l.ID() != keysIn(t, admin, a.dir("lock", n+".a"))[0].key {
		t.Errorf("Lease.ID %s: want the key of the first name in canonical order", l.ID())
	}
	if m := a.MultiLock(names...); m.Name() != n+".a,"+n+".b,"+n+".c" {
		t.Errorf("Name %q: want the names sorted", m.Name())
	}
	// The acquisition was one revision: one transaction.
	if l.Token() != r0.Header.Revision+1 {
		t.Errorf("token %d, revision before %d: more than one write", l.Token(), r0.Header.Revision)
	}
	if _, err := b.MultiLock(n+".b", n+".z").Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("an overlapping MultiLock: %v, want ErrNotAcquired", err)
	}
	if ks := keysIn(t, admin, b.dir("lock", n+".z")); len(ks) != 0 {
		t.Fatalf("a refused MultiLock left keys: %v", ks)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if ks := keysIn(t, admin, a.dir("lock", name)); len(ks) != 0 {
			t.Fatalf("%s after Unlock: keys %v", name, ks)
		}
	}
}

// A waiting MultiLock keeps its keys under every name (arrival order); a
// cancelled one removes them all.
func TestMultiLockWaitAndCancel(t *testing.T) {
	admin := etcdClient(t)
	a, b, c := newClient(t), newClient(t), newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	held, err := a.Lock(n + ".b").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.MultiLock(n+".a", n+".b").Acquire(wctx)
		done <- err
	}()
	awaitKeys(t, admin, a.dir("lock", n+".a"), "the waiting MultiLock's key", func(ks []*keyInfo) bool { return len(ks) == 1 })
	// A later Lock on the free name waits behind the MultiLock.
	if _, err := c.Lock(n+".a").Acquire(ctx, dlock.Wait(200*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a Lock behind a waiting MultiLock: %v, want ErrNotAcquired", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled MultiLock: %v", err)
	}
	for _, name := range []string{n + ".a", n + ".b"} {
		awaitKeys(t, admin, a.dir("lock", name), "the cancelled MultiLock's keys gone", func(ks []*keyInfo) bool {
			return len(ks) == 0 || (len(ks) == 1 && ks[0].key == held.ID())
		})
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Re-entry: the same MultiLock under its Context joins its hold; a Lock of
// a member, or a MultiLock over a name the owner holds as a Lock, is
// refused at once rather than waiting for itself.
func TestMultiLockReentry(t *testing.T) {
	admin := etcdClient(t)
	a := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	m, err := a.MultiLock(n+".a", n+".b").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r0, err := admin.Get(ctx, "x", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	again, err := a.MultiLock(n+".b", n+".a").Acquire(m.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("re-entering the MultiLock: %v", err)
	}
	if again.Token() != m.Token() {
		t.Errorf("re-entry token %d, want %d", again.Token(), m.Token())
	}
	if r1, _ := admin.Get(ctx, "x", clientv3.WithCountOnly()); r1.Header.Revision != r0.Header.Revision {
		t.Errorf("a re-entry wrote to etcd")
	}
	if _, err := a.Lock(n+".a").Acquire(m.Context(), dlock.Wait(time.Second)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("a Lock of a member under the MultiLock's owner: %v, want ErrInvalidArgument", err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Verify(ctx); err != nil {
		t.Fatalf("the MultiLock after its re-entry's Unlock: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := a.Lock(n + ".b").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.MultiLock(n+".a", n+".b").Acquire(l.Context(), dlock.Wait(time.Second)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("a MultiLock over the owner's Lock: %v, want ErrInvalidArgument", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A member's key deleted from outside loses the whole MultiLock at the
// next renewal, and its Unlock removes the other keys.
func TestMultiLockMemberDeleted(t *testing.T) {
	admin := etcdClient(t)
	a := newClient(t, Config{TTL: 2 * time.Second})
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	m, err := a.MultiLock(n+".a", n+".b").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kb := keysIn(t, admin, a.dir("lock", n+".b"))
	if len(kb) != 1 {
		t.Fatalf("keys of b: %v", kb)
	}
	if _, err := admin.Delete(ctx, kb[0].key); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(3 * time.Second):
		t.Fatal("a MultiLock whose member key was deleted was not told")
	}
	if err := m.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock: %v, want ErrLockLost", err)
	}
	if ks := keysIn(t, admin, a.dir("lock", n+".a")); len(ks) != 0 {
		t.Fatalf("the other member's key outlived the Unlock: %v", ks)
	}
}

func TestMultiLockTooManyNames(t *testing.T) {
	c := newClient(t)
	names := make([]string, MaxMultiNames+1)
	for i := range names {
		names[i] = lockName(t) + "." + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	if _, err := c.MultiLock(names...).Acquire(context.Background(), dlock.Wait(0)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("%d names: %v, want ErrInvalidArgument", len(names), err)
	}
	l, err := c.MultiLock(names[:MaxMultiNames]...).Acquire(testCtx(t, 20*time.Second), dlock.Wait(0))
	if err != nil {
		t.Fatalf("%d names: %v", MaxMultiNames, err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
}
