package etcdlock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// listed returns the names and shapes of infos, in order, checking that
// each is held and that they are oldest first.
func listed(t *testing.T, infos []dlock.Info) (names, shapes []string) {
	t.Helper()
	for i, info := range infos {
		if !info.Held || len(info.Holders) == 0 {
			t.Errorf("%q listed but not held: %+v", info.Name, info)
		}
		if i > 0 && infos[i-1].Holders[0].Since.After(info.Holders[0].Since) {
			t.Errorf("%q (since %v) after %q (since %v): not oldest first", info.Name, info.Holders[0].Since,
				infos[i-1].Name, infos[i-1].Holders[0].Since)
		}
		names = append(names, info.Name)
		shapes = append(shapes, info.Shape)
	}
	return names, shapes
}

// List finds every shape's held locks by a glob, oldest first; free and
// foreign keys are left out; a release shows at the next List.
func TestList(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	prefix := "list-" + lockName(t) + "/"
	holder := newClient(t, Config{Prefix: prefix, Label: "holder"})
	ops := newClient(t, Config{Prefix: prefix})
	other := newClient(t, Config{Prefix: prefix + "x/"}) // its keys are under ops's prefix, in no shape's directory

	var leases []*dlock.Lease
	acquire := func(l dlock.Locker) *dlock.Lease {
		t.Helper()
		lease, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
		time.Sleep(5 * time.Millisecond) // distinct Since, in ms
		return lease
	}
	defer func() {
		for _, l := range leases {
			_ = l.Unlock(ctx)
		}
	}()
	stock1 := acquire(holder.Mutex("stock:1"))
	acquire(holder.Lock("order/7"))
	acquire(holder.RWLock("stock:2").ReadLock())
	acquire(holder.Semaphore("a[1]", 2))
	acquire(holder.MultiLock("stock:3", "multi:x"))
	acquire(holder.Mutex("dup"))
	acquire(holder.Semaphore("dup", 1)) // another lock of the same name: listed once, as Inspect reports it
	acquire(other.Mutex("stock:other"))
	// Left out: a released lock, a free Semaphore whose count is kept, keys
	// of no lock's layout.
	for _, l := range []dlock.Locker{holder.Mutex("stock:freed"), holder.Semaphore("stock:sem", 1)} {
		lease, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []string{"mutex/stock:x", "mutex/-1:stock:x/", "mutex/07:stock:x/a", "mutex/7:stock:x", "mutex/0:/a", "lock/99:stock:x/a"} {
		if _, err := holder.cli.Put(ctx, prefix+key, "x"); err != nil {
			t.Fatal(err)
		}
	}

	infos, err := ops.List(ctx, "stock:*")
	if err != nil {
		t.Fatal(err)
	}
	names, shapes := listed(t, infos)
	if want := []string{"stock:1", "stock:2", "stock:3"}; !slices.Equal(names, want) {
		t.Fatalf("List(stock:*) = %v, want %v", names, want)
	}
	if want := []string{"mutex", "rw", "lock"}; !slices.Equal(shapes, want) {
		t.Errorf("List(stock:*) shapes %v, want %v", shapes, want)
	}
	if h := infos[0].Holders[0]; h.Label != "holder" || h.Fence != stock1.Token() || infos[0].TTL <= 0 {
		t.Errorf("stock:1 = %+v, want held by label holder, token %d, with a TTL", infos[0], stock1.Token())
	}

	for _, pattern := range []string{"*", ""} {
		infos, err = ops.List(ctx, pattern)
		if err != nil {
			t.Fatal(err)
		}
		names, shapes = listed(t, infos)
		// The MultiLock's two members have one Since: by name.
		if want := []string{"stock:1", "order/7", "stock:2", "a[1]", "multi:x", "stock:3", "dup"}; !slices.Equal(names, want) {
			t.Fatalf("List(%q) = %v, want %v", pattern, names, want)
		}
		if want := []string{"mutex", "lock", "rw", "semaphore", "lock", "lock", "mutex"}; !slices.Equal(shapes, want) {
			t.Errorf("List(%q) shapes %v, want %v", pattern, shapes, want)
		}
	}

	// Glob characters in a name: matched by the escaped pattern only.
	infos, err = ops.List(ctx, `a\[1\]`)
	if names, _ := listed(t, infos); err != nil || !slices.Equal(names, []string{"a[1]"}) {
		t.Fatalf(`List(a\[1\]) = %v, %v; want a[1]`, names, err)
	}
	if infos, err = ops.List(ctx, "a[1]"); err != nil || len(infos) != 0 {
		t.Fatalf("List(a[1]) = %+v, %v; want nothing (it matches a1)", infos, err)
	}
	infos, err = ops.List(ctx, "*/?")
	if names, _ := listed(t, infos); err != nil || !slices.Equal(names, []string{"order/7"}) {
		t.Fatalf("List(*/?) = %v, %v; want order/7", names, err)
	}

	if err := stock1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	infos, err = ops.List(ctx, "stock:*")
	if names, _ := listed(t, infos); err != nil || !slices.Equal(names, []string{"stock:2", "stock:3"}) {
		t.Fatalf("List(stock:*) after stock:1's release = %v, %v", names, err)
	}
}

func TestListBadInput(t *testing.T) {
	c := newClient(t)
	_, err := c.List(context.Background(), strings.Repeat("*", seam.MaxNameLen+1))
	if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), `dlock: list "`) {
		t.Fatalf("List(long pattern) = %v, want ErrInvalidArgument", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.List(ctx, "*"); !errors.Is(err, context.Canceled) {
		t.Fatalf("List(cancelled ctx) = %v, want context.Canceled", err)
	}
	//lint:ignore SA1012 a nil ctx is refused, not a panic
	if _, err := c.List(nil, "*"); !errors.Is(err, dlock.ErrInvalidArgument) { //nolint:staticcheck
		t.Fatalf("List(nil ctx) = %v, want ErrInvalidArgument", err)
	}
}
