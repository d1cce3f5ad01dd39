package dlock_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
)

// state is what a view shows of listed locks, TTLs and the slot's fence
// counter aside: name, shape, holders (id, token, re-entries, mode),
// waiters.
func state(infos []dlock.Info) []string {
	var out []string
	for _, i := range infos {
		s := i.Name + " " + i.Shape
		for _, h := range i.Holders {
			s += fmt.Sprintf(" [%s %d x%d %s]", h.ID, h.Fence, h.Count, h.Mode)
		}
		out = append(out, fmt.Sprintf("%s waiters:%d", s, len(i.Queue)))
	}
	return out
}

// listerAgrees lists with lister and with List and fails unless they show
// the same state, every lease the Lister shows no longer than List's read
// just after it; it returns the Lister's list.
func listerAgrees(t *testing.T, step string, c *dlock.Client, lister *dlock.Lister) []dlock.Info {
	t.Helper()
	ctx := context.Background()
	got, err := lister.List(ctx, "*")
	if err != nil {
		t.Fatalf("%s: Lister.List: %v", step, err)
	}
	want, err := c.List(ctx, "*")
	if err != nil {
		t.Fatalf("%s: List: %v", step, err)
	}
	if g, w := state(got), state(want); !slices.Equal(g, w) {
		t.Fatalf("%s: Lister.List =\n  %s\nList =\n  %s", step, strings.Join(g, "\n  "), strings.Join(w, "\n  "))
	}
	for k := range got {
		if g, w := got[k].TTL, want[k].TTL; (g < 0) != (w < 0) || g+100*time.Millisecond < w {
			t.Fatalf("%s: %s: the Lister's TTL %v, List's just after %v", step, got[k].Name, g, w)
		}
	}
	return got
}

// A Lister lists what List lists after every kind of change: a new grant
// of the same shape, a re-entry, a waiter, an extension, a release, another
// shape on the name, a foreign key, a deleted key; and locks that did not
// change cost Redis a check, not a whole read (no TYPE, one script call per
// batch).
func TestListerFollowsChanges(t *testing.T) {
	rdb := server(t)
	c, other := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	lister := c.NewLister()
	must := func(l *dlock.Lease, err error) *dlock.Lease {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	m := must(c.Mutex("m").Acquire(ctx, dlock.LeaseTime(time.Minute)))
	lk := must(c.Lock("l").Acquire(ctx, dlock.LeaseTime(time.Minute)))
	must(c.FairLock("f").Acquire(ctx))
	must(c.RWLock("r").ReadLock().Acquire(ctx))
	must(c.Semaphore("s", 3).Acquire(ctx))
	for i := range 150 {
		must(c.Mutex(fmt.Sprintf("many:%d", i)).Acquire(ctx, dlock.LeaseTime(time.Minute)))
	}
	unlock := func(l *dlock.Lease) {
		t.Helper()
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	listerAgrees(t, "first", c, lister)

	// Nothing changed: the Mutexes, Lock and FairLock are checked, the
	// RWLock and Semaphore read whole.
	types, calls := commandCalls(t, rdb, "type"), commandCalls(t, rdb, "fcall")+commandCalls(t, rdb, "evalsha")
	if _, err := lister.List(ctx, "many:*"); err != nil {
		t.Fatal(err)
	}
	if n := commandCalls(t, rdb, "type") - types; n != 0 {
		t.Errorf("a List of 150 unchanged Mutexes ran TYPE %d times: read whole, not checked", n)
	}
	if n := commandCalls(t, rdb, "fcall") + commandCalls(t, rdb, "evalsha") - calls; n != 2 {
		t.Errorf("a List of 150 unchanged Mutexes made %d script calls, want 2 (a check per 100)", n)
	}
	listerAgrees(t, "unchanged", c, lister)

	unlock(m)
	m = must(other.Mutex("m").Acquire(ctx, dlock.LeaseTime(time.Minute)))
	listerAgrees(t, "m granted anew", c, lister)

	lk2 := must(c.Lock("l").Acquire(context.WithoutCancel(lk.Context()), dlock.Wait(0)))
	listerAgrees(t, "l re-entered", c, lister)
	unlock(lk2)
	listerAgrees(t, "l left once", c, lister)

	before := listerAgrees(t, "before extend", c, lister)
	if err := m.Extend(ctx, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	after := listerAgrees(t, "m extended", c, lister)
	ttl := func(infos []dlock.Info) time.Duration {
		for _, i := range infos {
			if i.Name == "m" {
				return i.TTL
			}
		}
		return 0
	}
	if ttl(after) < 9*time.Minute || ttl(before) > time.Minute {
		t.Errorf("m's TTL before and after Extend(10m): %v, %v", ttl(before), ttl(after))
	}

	wctx, stopWaiting := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		l, err := c.Mutex("m").Acquire(wctx, dlock.Wait(time.Minute))
		if err == nil {
			_ = l.Unlock(ctx)
		}
		waited <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Inspect(ctx, "m")
		if err == nil && len(info.Queue) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter did not queue: %+v, %v", info, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	listerAgrees(t, "m waited for", c, lister)
	stopWaiting()
	<-waited

	unlock(m)
	listerAgrees(t, "m released", c, lister)
	must(c.Lock("m").Acquire(ctx))
	listerAgrees(t, "m a Lock now", c, lister)

	if err := rdb.Set(ctx, "dlock:{many:0}", "not a lock", 0).Err(); err != nil {
		t.Fatal(err)
	}
	listerAgrees(t, "many:0 a foreign string", c, lister)
	if f := lister.Foreign(); !slices.Equal(f, []string{"many:0"}) {
		t.Errorf("Foreign() = %q, want [many:0]", f)
	}
	if err := rdb.Del(ctx, "dlock:{many:1}").Err(); err != nil {
		t.Fatal(err)
	}
	got := listerAgrees(t, "many:1 deleted", c, lister)
	if len(got) != 153 {
		t.Errorf("%d locks listed at the end, want 153", len(got))
	}
}

// On a Cluster a Lister reads every lock whole, as List does.
func TestListerCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	c := newClient(t, redistest.ClusterClient(t, cl))
	names := make([]string, 120)
	for i := range names {
		names[i] = fmt.Sprintf("stock:%d", i)
	}
	holdMany(t, c, names)
	lister := c.NewLister()
	for i := range 2 {
		infos, err := lister.List(context.Background(), "stock:*")
		if err != nil || len(infos) != len(names) {
			t.Fatalf("List %d on the cluster: %d locks, %v; want %d", i+1, len(infos), err, len(names))
		}
	}
}

func ExampleLister() {
	rdb := exampleRedis()
	defer rdb.Close()
	c, err := dlock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	l, err := c.Mutex("example-lister:sku:1").Acquire(ctx, dlock.Wait(3*time.Second))
	if err != nil {
		panic(err)
	}
	defer l.Unlock(ctx)
	// A live view lists again and again: the second List only checks that
	// sku:1 still holds the same grant, and reads its lease anew.
	lister := c.NewLister()
	for range 2 {
		infos, err := lister.List(ctx, "example-lister:*")
		if err != nil {
			panic(err)
		}
		for _, i := range infos {
			fmt.Println(i.Name, i.Shape, i.Holders[0].Fence == l.Token())
		}
	}
	// Output:
	// example-lister:sku:1 mutex true
	// example-lister:sku:1 mutex true
}
