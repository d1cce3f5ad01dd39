package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/go-zookeeper/zk"
)

// countIn returns the permit count ZooKeeper keeps for the semaphore name:
// the count node's data and children ("", nil when there is none).
func countIn(t *testing.T, admin *Client, name string) (string, []string) {
	t.Helper()
	p := admin.permitsPath(name)
	data, _, err := admin.conn.Get(p)
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		t.Fatal(err)
	}
	ch, _, err := admin.conn.Children(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data), ch
}

// checkCount fails t unless ZooKeeper keeps the count want for name.
func checkCount(t *testing.T, admin *Client, name, want string) {
	t.Helper()
	if data, ch := countIn(t, admin, name); data != want || !slices.Equal(ch, []string{want}) {
		t.Fatalf("the count node of %q has data %q and children %v, want %q and [%s]", name, data, ch, want, want)
	}
}

// The count lives in ZooKeeper: the first acquisition sets it, one with
// another count is refused at once and makes nothing (a try and a wait
// alike: the transaction's check fails), and the count outlives the
// permits and the removal of the semaphore's nodes.
func TestSemaphorePermitsInZooKeeper(t *testing.T) {
	admin := dial(t, 3*time.Second)
	a, b := dial(t, 3*time.Second), dial(t, 3*time.Second)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	first, err := a.Semaphore(n, 1).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkCount(t, admin, n, "1")
	_, dirSt, err := admin.conn.Get(admin.dir(familySemaphore, n))
	if err != nil {
		t.Fatal(err)
	}
	for _, opt := range []dlock.Option{dlock.Wait(0), dlock.Wait(5 * time.Second)} {
		start := time.Now()
		_, err := b.Semaphore(n, 3).Acquire(ctx, opt)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "keeps 1 permits") || !strings.Contains(err.Error(), n) {
			t.Fatalf("a Semaphore of 3 where ZooKeeper keeps 1: %v, want ErrInvalidArgument naming the 1 and the semaphore", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("the refusal took %v", d)
		}
		_, st, err := admin.conn.Get(admin.dir(familySemaphore, n))
		if err != nil {
			t.Fatal(err)
		}
		if st.Cversion != dirSt.Cversion || st.Version != dirSt.Version {
			t.Fatalf("the refused acquisition changed the semaphore's directory: %+v, was %+v", st, dirSt)
		}
		checkCount(t, admin, n, "1")
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Semaphore(n, 2).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("after the permits were released: %v, want the stored count kept", err)
	}
	info, err := a.Inspect(ctx, n)
	if err != nil || info.Shape != "semaphore" || info.Permits != 1 || info.Held {
		t.Fatalf("Inspect of a free semaphore: %+v %v, want its count 1", info, err)
	}
	// Two counts (set by hand) refuse every Semaphore, showing both.
	if _, err := admin.conn.Create(admin.permitsPath(n)+"/4", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Semaphore(n, 2).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "[1 4]") {
		t.Fatalf("two counts in ZooKeeper: %v", err)
	}
	// SetPermits repairs it.
	if err := a.Semaphore(n, 1).SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	checkCount(t, admin, n, "2")
	// Removed by hand (the node and its child): the next acquisition sets
	// it again.
	for _, p := range []string{admin.permitsPath(n) + "/2", admin.permitsPath(n)} {
		if err := admin.conn.Delete(p, -1); err != nil {
			t.Fatal(err)
		}
	}
	l, err := b.Semaphore(n, 3).Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	checkCount(t, admin, n, "3")
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Three first users with different counts at once: one count wins, every
// permit granted was granted under it, and the others are refused.
func TestSemaphoreFirstCountRace(t *testing.T) {
	admin := dial(t, 3*time.Second)
	cs := []*Client{dial(t, 3*time.Second), dial(t, 3*time.Second), dial(t, 3*time.Second)}
	ctx := testCtx(t, 60*time.Second)
	for round := range 10 {
		n := fmt.Sprintf("%s.%d", lockName(t), round)
		var wg sync.WaitGroup
		granted := make([]bool, len(cs))
		errs := make([]error, len(cs))
		start := make(chan struct{})
		for i, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				l, err := c.Semaphore(n, i+1).Acquire(ctx, dlock.Wait(0))
				errs[i] = err
				if err == nil {
					granted[i] = true
					_ = l.Unlock(ctx)
				}
			}()
		}
		close(start)
		wg.Wait()
		got, _ := countIn(t, admin, n)
		winners := 0
		for i, err := range errs {
			switch {
			case granted[i]:
				winners++
				checkCount(t, admin, n, fmt.Sprint(i+1))
			case !errors.Is(err, dlock.ErrInvalidArgument):
				t.Fatalf("round %d: the Semaphore of %d: %v, want granted or ErrInvalidArgument", round, i+1, err)
			}
		}
		if winners != 1 {
			t.Fatalf("round %d: %d Semaphores granted (count %q), want the one whose count was set", round, winners, got)
		}
	}
}

// SetPermits changes the count for everyone: raised, it lets its own
// Semaphore's waiter in; a waiter whose Semaphore has the old count is
// refused at once; lowered, permits held beyond it stay held until they
// are released.
func TestSemaphoreSetPermits(t *testing.T) {
	admin := dial(t, 3*time.Second)
	a, b, c := dial(t, 3*time.Second), dial(t, 3*time.Second), dial(t, 3*time.Second)
	ctx := testCtx(t, 60*time.Second)
	n := lockName(t)
	p1, err := a.Semaphore(n, 1).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor := func(l dlock.Locker) <-chan error {
		got := make(chan error, 1)
		go func() {
			lease, err := l.Acquire(ctx, dlock.Wait(20*time.Second))
			if err == nil {
				t.Cleanup(func() { _ = lease.Unlock(context.Background()) })
			}
			got <- err
		}()
		return got
	}
	queued := func(k int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for len(members(t, admin, familySemaphore, n)) != k {
			if time.Now().After(deadline) {
				t.Fatalf("%v queued, want %d", members(t, admin, familySemaphore, n), k)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	w := b.Semaphore(n, 1)
	got := waitFor(w)
	queued(2)
	if err := w.SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the waiter of the Semaphore whose SetPermits raised the count: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not let in by SetPermits(2)")
	}
	checkCount(t, admin, n, "2")
	stale := waitFor(c.Semaphore(n, 2))
	queued(3)
	changed := time.Now()
	if err := a.Semaphore(n, 2).SetPermits(ctx, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-stale:
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("a waiter with the old count: %v, want ErrInvalidArgument", err)
		}
		t.Logf("the waiter with the old count was refused %v after the change", time.Since(changed).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter with the old count was not refused when the count changed")
	}
	queued(2) // the refused waiter's node is gone
	if err := p1.Verify(ctx); err != nil {
		t.Fatalf("a permit held beyond the lowered count: %v", err)
	}
	one := c.Semaphore(n, 1)
	if _, err := one.Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a permit of 1 while 2 are held: %v", err)
	}
	if err := p1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := one.Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a permit of 1 while 1 is held: %v", err)
	}
	info, err := a.Inspect(ctx, n)
	if err != nil || info.Permits != 1 || len(info.Holders) != 1 {
		t.Fatalf("Inspect after SetPermits(1): %+v %v", info, err)
	}

	// Bad input changes nothing.
	for _, tc := range []struct {
		ctx  context.Context
		n    int
		want error
	}{{ctx, 0, dlock.ErrInvalidArgument}, {ctx, -1, dlock.ErrInvalidArgument}, {nil, 3, dlock.ErrInvalidArgument}} {
		if err := one.SetPermits(tc.ctx, tc.n); !errors.Is(err, tc.want) {
			t.Fatalf("SetPermits(%d): %v, want %v", tc.n, err, tc.want)
		}
	}
	if err := a.Semaphore("", 1).SetPermits(ctx, 1); !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf("SetPermits of a bad name: %v", err)
	}
	checkCount(t, admin, n, "1")
	closed := dial(t, 3*time.Second)
	closed.Close()
	if err := closed.Semaphore(n, 1).SetPermits(ctx, 5); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("SetPermits on a closed client: %v", err)
	}
}

// The count costs an uncontended permit no request: acquire and release
// are two requests, as for a Mutex (the check of the count is part of the
// transaction that queues the node).
func TestSemaphoreUncontendedRequests(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	c := dial(t, 10*time.Second)
	n := lockName(t)
	warm, err := c.Semaphore(n, 2).Acquire(ctx) // the directory and the count exist
	if err != nil {
		t.Fatal(err)
	}
	warm.Unlock(ctx)
	const pairs = 50
	p0 := packets(t, server.Addr())
	for range pairs {
		l, err := c.Semaphore(n, 2).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := packets(t, server.Addr()) - p0 - 1; got < 2*pairs || got > 2*pairs+5 {
		t.Fatalf("%d requests for %d pairs, want 2 a pair", got, pairs)
	}
}
