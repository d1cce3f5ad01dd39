package zklock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/witness"
)

// TestMultiLockAllOrNone: a MultiLock that cannot take every member takes
// none: with one member held elsewhere, a bounded wait ends with
// ErrNotAcquired and leaves no node in any member's queue; once the member
// is free it takes all of them, with a token above the last holder's.
func TestMultiLockAllOrNone(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	a, b, admin := dial(t, 3*time.Second), dial(t, 3*time.Second), dial(t, 3*time.Second)
	x, y, z := lockName(t)+"x", lockName(t)+"y", lockName(t)+"z"
	held, err := a.Mutex(y).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := b.MultiLock(z, y, x)
	if m.Name() != x+","+y+","+z {
		t.Fatalf("Name %q: want the members in canonical order", m.Name())
	}
	for _, w := range []time.Duration{0, 200 * time.Millisecond} {
		if _, err := m.Acquire(ctx, dlock.Wait(w)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("Wait(%v) with a member held: %v, want ErrNotAcquired", w, err)
		}
		for _, n := range []string{x, z} {
			if got := members(t, admin, familyLock, n); len(got) != 0 {
				t.Fatalf("Wait(%v): %s keeps nodes %v after the MultiLock gave up", w, n, got)
			}
			l, err := admin.Mutex(n).Acquire(ctx, dlock.Wait(0))
			if err != nil {
				t.Fatalf("Wait(%v): %s not free after the MultiLock gave up: %v", w, n, err)
			}
			l.Unlock(ctx)
		}
		if got := members(t, admin, familyLock, y); len(got) != 1 {
			t.Fatalf("Wait(%v): %s has %v, want the holder's node alone", w, y, got)
		}
	}
	// Waiting: granted once y is released, all three at once.
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := m.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitFor(t, func() bool { return len(members(t, admin, familyLock, y)) == 2 })
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if l.Token() <= held.Token() {
		t.Fatalf("token %d after %d", l.Token(), held.Token())
	}
	for _, n := range []string{x, y, z} {
		if _, err := admin.Lock(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("%s taken beside the MultiLock: %v", n, err)
		}
	}
	if err := l.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{x, y, z} {
		if got := members(t, admin, familyLock, n); len(got) != 0 {
			t.Fatalf("%s keeps %v after Unlock", n, got)
		}
	}
}

// TestMultiLockExclusion: MultiLocks over overlapping sets of names and
// Mutexes of single names, on three clients at once: no two holders of a
// name overlap, every grant's token on a name is above the one before it,
// and nobody deadlocks (every round ends).
func TestMultiLockExclusion(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	p := lockName(t)
	names := []string{p + "a", p + "b", p + "c"}
	sets := [][]string{{names[0], names[1]}, {names[1], names[2]}, {names[2], names[0]}, {names[0], names[1], names[2]}, {names[1]}}
	var w witness.Witness
	var mu sync.Mutex
	last := map[string]int64{}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for ci := range 3 {
		c := dial(t, 3*time.Second)
		for g := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for round := range 8 {
					set := sets[(ci*3+g+round)%len(sets)]
					var locker dlock.Locker = c.MultiLock(set...)
					if len(set) == 1 {
						locker = c.Mutex(set[0])
					}
					l, err := locker.Acquire(ctx)
					if err != nil {
						errs <- fmt.Errorf("%v: %w", set, err)
						return
					}
					mu.Lock()
					for _, n := range set {
						if l.Token() <= last[n] {
							errs <- fmt.Errorf("%s: token %d after %d", n, l.Token(), last[n])
						}
						last[n] = l.Token()
					}
					mu.Unlock()
					for _, n := range set {
						w.Enter(n)
					}
					time.Sleep(time.Millisecond)
					for _, n := range set {
						w.Exit(n)
					}
					if err := l.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if o := w.Overlaps(); o != 0 || w.Entries() == 0 {
		t.Fatalf("%d overlaps in %d entries", o, w.Entries())
	}
}

// TestMultiLockDeleted: a MultiLock one of whose nodes is deleted from
// outside is told at once, and its other nodes are deleted (they block
// nobody).
func TestMultiLockDeleted(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	a, admin := dial(t, 3*time.Second), dial(t, 3*time.Second)
	x, y := lockName(t)+"x", lockName(t)+"y"
	l, err := a.MultiLock(x, y).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.conn.Delete(firstNode(t, admin, familyLock, y), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(time.Second):
		t.Fatalf("not told within 1s that a member's node was deleted (Err %v)", l.Err())
	}
	if err := l.Err(); !deletedOrTaken(err) {
		t.Fatalf("Err %v", err)
	}
	next, err := admin.Mutex(x).Acquire(ctx, dlock.Wait(5*time.Second))
	if err != nil {
		t.Fatalf("the other member after the loss: %v", err)
	}
	next.Unlock(ctx)
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock: %v, want ErrLockLost", err)
	}
}

// TestMultiLockOwner: a MultiLock re-enters under its own Context (one
// token, free after both unlocks); its owner's Lock or read of a member,
// and its owner's MultiLock over a name it holds as a Lock, are refused at
// once rather than waiting for themselves; a cancelled waiter leaves
// nothing behind; bad input is refused.
func TestMultiLockOwner(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	a, b, admin := dial(t, 3*time.Second), dial(t, 3*time.Second), dial(t, 3*time.Second)
	x, y := lockName(t)+"x", lockName(t)+"y"
	outer, err := a.MultiLock(x, y).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := a.MultiLock(y, x).Acquire(outer.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("re-entry: %v", err)
	}
	if inner.Token() != outer.Token() {
		t.Fatalf("re-entry token %d, outer %d", inner.Token(), outer.Token())
	}
	if _, err := a.Lock(x).Acquire(outer.Context(), dlock.Wait(time.Second)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("a Lock of a member under the MultiLock: %v, want ErrInvalidArgument", err)
	}
	if _, err := a.RWLock(y).WriteLock().Acquire(outer.Context(), dlock.Wait(time.Second)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("a write lock of a member under the MultiLock: %v, want ErrInvalidArgument", err)
	}
	// A MultiLock of one member named "x,y" is another lock: the owner
	// does not re-enter the MultiLock over x and y through it.
	joined, err := a.MultiLock(x+","+y).Acquire(outer.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("the MultiLock of the one name %q under the owner of (%q, %q): %v", x+","+y, x, y, err)
	}
	if joined.Token() == outer.Token() {
		t.Fatalf("the MultiLock of the one name %q joined the hold of (%q, %q) (token %d)", x+","+y, x, y, outer.Token())
	}
	if err := joined.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.MultiLock(x).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("free after one of two unlocks: %v", err)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	lk, err := a.Lock(x).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.MultiLock(x, y).Acquire(lk.Context(), dlock.Wait(time.Second)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("a MultiLock over its owner's Lock: %v, want ErrInvalidArgument", err)
	}
	lk.Unlock(ctx)
	rd, err := a.RWLock(y).ReadLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.MultiLock(x, y).Acquire(rd.Context(), dlock.Wait(time.Second)); !errors.Is(err, dlock.ErrUpgrade) {
		t.Fatalf("a MultiLock over its owner's read: %v, want ErrUpgrade", err)
	}

	// A waiter cancelled behind the reader leaves no node in either queue.
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.MultiLock(x, y).Acquire(wctx)
		done <- err
	}()
	waitFor(t, func() bool { return len(members(t, admin, familyLock, y)) == 2 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if got := members(t, admin, familyLock, x); len(got) != 0 {
		t.Fatalf("%s keeps %v", x, got)
	}
	if got := members(t, admin, familyLock, y); len(got) != 1 {
		t.Fatalf("%s has %v, want the reader's node alone", y, got)
	}
	rd.Unlock(ctx)

	for _, m := range []*MultiLock{a.MultiLock(), a.MultiLock(x, x), a.MultiLock(x, "")} {
		_, err := m.Acquire(ctx)
		if !errors.Is(err, dlock.ErrInvalidArgument) && !errors.Is(err, dlock.ErrInvalidName) {
			t.Errorf("MultiLock(%q): %v, want ErrInvalidArgument or ErrInvalidName", m.Name(), err)
		}
	}
}
