package etcdlock

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
	clientv3 "go.etcd.io/etcd/client/v3"
)

// countIn returns the permit count etcd keeps for the semaphore called
// name ("" when none).
func countIn(t testing.TB, cli *clientv3.Client, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, (&Client{prefix: DefaultPrefix}).permitsKey(name))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// keyNames returns the names of the keys in dir.
func keyNames(t testing.TB, cli *clientv3.Client, dir string) []string {
	var out []string
	for _, k := range keysIn(t, cli, dir) {
		out = append(out, k.key)
	}
	return out
}

// The count lives in etcd: the first acquisition sets it, one with another
// count is refused at once, writing nothing (a try and a wait alike), and
// the count outlives the permits and a removal of the semaphore's keys.
func TestSemaphorePermitsInEtcd(t *testing.T) {
	admin := etcdClient(t)
	a, b := newClient(t), newClient(t)
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	dir := a.dir("semaphore", n)
	first, err := a.Semaphore(n, 1).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := countIn(t, admin, n); got != "1" {
		t.Fatalf("count in etcd %q after the first acquisition, want \"1\"", got)
	}
	keys := keyNames(t, admin, dir)
	for _, opt := range []dlock.Option{dlock.Wait(0), dlock.Wait(5 * time.Second)} {
		start := time.Now()
		_, err := b.Semaphore(n, 3).Acquire(ctx, opt)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "keeps 1 permits") || !strings.Contains(err.Error(), n) {
			t.Fatalf("a Semaphore of 3 where etcd keeps 1: %v, want ErrInvalidArgument naming the 1 and the semaphore", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("the refusal took %v", d)
		}
		if got := keyNames(t, admin, dir); !slices.Equal(got, keys) || countIn(t, admin, n) != "1" {
			t.Fatalf("the refused acquisition changed etcd: keys %v (were %v), count %q", got, keys, countIn(t, admin, n))
		}
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctx, dir, clientv3.WithPrefix()); err != nil { // what a force unlock removes
		t.Fatal(err)
	}
	if _, err := b.Semaphore(n, 2).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("after the permits were released and their keys removed: %v, want the stored count kept", err)
	}
	info, err := a.Inspect(ctx, n)
	if err != nil || info.Shape != "semaphore" || info.Permits != 1 || info.Held {
		t.Fatalf("Inspect of a free semaphore: %+v %v, want its count 1", info, err)
	}
	// A count that is not a number (written by hand) refuses everyone,
	// showing what is there.
	if _, err := admin.Put(ctx, a.permitsKey(n), "two"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Semaphore(n, 1).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), `"two"`) {
		t.Fatalf("a count of \"two\" in etcd: %v", err)
	}
	// Deleted from outside: the next acquisition sets it again.
	if _, err := admin.Delete(ctx, a.permitsKey(n)); err != nil {
		t.Fatal(err)
	}
	l, err := b.Semaphore(n, 2).Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if got := countIn(t, admin, n); got != "2" {
		t.Fatalf("count %q, want \"2\"", got)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// Two first users with different counts at once: one count wins, and
// every permit granted was granted under it; the other is refused.
func TestSemaphoreFirstCountRace(t *testing.T) {
	admin := etcdClient(t)
	cs := []*Client{newClient(t), newClient(t), newClient(t)}
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
		got := countIn(t, admin, n)
		winners := 0
		for i, err := range errs {
			switch {
			case granted[i]:
				winners++
				if got != fmt.Sprint(i+1) {
					t.Fatalf("round %d: a Semaphore of %d was granted, etcd keeps %q", round, i+1, got)
				}
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
	admin := etcdClient(t)
	a, b, c := newClient(t), newClient(t), newClient(t)
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
	w := b.Semaphore(n, 1)
	got := waitFor(w)
	awaitKeys(t, admin, a.dir("semaphore", n), "a waiter", func(ks []*keyInfo) bool { return len(ks) == 2 })
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
	if got := countIn(t, admin, n); got != "2" {
		t.Fatalf("count %q, want \"2\"", got)
	}
	// Both permits held: a waiter of the old count is refused as soon as
	// the count changes again.
	stale := waitFor(c.Semaphore(n, 2))
	awaitKeys(t, admin, a.dir("semaphore", n), "a third waiter", func(ks []*keyInfo) bool { return len(ks) == 3 })
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
	// Lowered to 1 with 2 held: both stay held, nobody else gets in until
	// both are released.
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
	if got := countIn(t, admin, n); got != "1" {
		t.Fatalf("count %q after bad SetPermits calls, want \"1\"", got)
	}
	closed := newClient(t)
	closed.Close()
	if err := closed.Semaphore(n, 1).SetPermits(ctx, 5); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("SetPermits on a closed client: %v", err)
	}
}
