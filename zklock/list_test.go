package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// namesOf returns the names and shapes of infos, in order, checking that
// each is held and that they are oldest first.
func namesOf(t *testing.T, infos []dlock.Info) (names, shapes []string) {
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

// List finds every shape's held locks by a glob, oldest first; free locks
// and foreign directories are left out; a release shows at the next List.
func TestList(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	const timeout = 3 * time.Second
	root := fmt.Sprintf("/list-%d", time.Now().UnixNano())
	holder := dial(t, timeout, Config{Prefix: root, Label: "holder"})
	ops := dial(t, timeout, Config{Prefix: root})

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
	acquire(holder.Semaphore("dup", 1)) // the other family: listed once, as Inspect reports it
	// Left out: a released lock (its directory stays), a free Semaphore
	// whose count is kept, children that are no escaped name.
	for _, l := range []dlock.Locker{holder.Mutex("stock:freed"), holder.Semaphore("stock:sem", 1)} {
		lease, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, child := range []string{"%ZZ", "stock:x", "stock%3ax"} {
		if _, err := holder.conn.Create(root+"/"+familyLock+"/"+child, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.conn.Create(root+"/"+familyLock+"/"+child+"/w-0123456789abcdef-0000000001", []byte("mutex|"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}

	infos, err := ops.List(ctx, "stock:*")
	if err != nil {
		t.Fatal(err)
	}
	names, shapes := namesOf(t, infos)
	if want := []string{"stock:1", "stock:2", "stock:3"}; !slices.Equal(names, want) {
		t.Fatalf("List(stock:*) = %v, want %v", names, want)
	}
	if want := []string{"mutex", "rw", "multi"}; !slices.Equal(shapes, want) {
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
		names, shapes = namesOf(t, infos)
		// The MultiLock's two members have one Since: by name.
		if want := []string{"stock:1", "order/7", "stock:2", "a[1]", "multi:x", "stock:3", "dup"}; !slices.Equal(names, want) {
			t.Fatalf("List(%q) = %v, want %v", pattern, names, want)
		}
		if want := []string{"mutex", "lock", "rw", "semaphore", "multi", "multi", "mutex"}; !slices.Equal(shapes, want) {
			t.Errorf("List(%q) shapes %v, want %v", pattern, shapes, want)
		}
	}

	// Glob characters in a name: matched by the escaped pattern only.
	infos, err = ops.List(ctx, `a\[1\]`)
	if names, _ := namesOf(t, infos); err != nil || !slices.Equal(names, []string{"a[1]"}) {
		t.Fatalf(`List(a\[1\]) = %v, %v; want a[1]`, names, err)
	}
	if infos, err = ops.List(ctx, "a[1]"); err != nil || len(infos) != 0 {
		t.Fatalf("List(a[1]) = %+v, %v; want nothing (it matches a1)", infos, err)
	}
	infos, err = ops.List(ctx, "*/?")
	if names, _ := namesOf(t, infos); err != nil || !slices.Equal(names, []string{"order/7"}) {
		t.Fatalf("List(*/?) = %v, %v; want order/7", names, err)
	}

	if err := stock1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	infos, err = ops.List(ctx, "stock:*")
	if names, _ := namesOf(t, infos); err != nil || !slices.Equal(names, []string{"stock:2", "stock:3"}) {
		t.Fatalf("List(stock:*) after stock:1's release = %v, %v", names, err)
	}

	// A root with no lock yet: nothing, no error.
	empty := dial(t, timeout, Config{Prefix: root + "-empty"})
	if infos, err := empty.List(ctx, "*"); err != nil || len(infos) != 0 {
		t.Fatalf("List on an empty root = %+v, %v", infos, err)
	}
}

func TestListBadInput(t *testing.T) {
	c := dial(t, 3*time.Second)
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
	c.Close()
	if _, err := c.List(context.Background(), "*"); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("List on a closed Client = %v, want ErrClosed", err)
	}
}

// unescape reads back what escape writes, and nothing else.
func TestUnescape(t *testing.T) {
	for _, name := range []string{"stock:1", "order/7", "a[1]", "a b", ".", "..", "%", "é", "\xff"} {
		if got, ok := unescape(escape(name)); !ok || got != name {
			t.Errorf("unescape(escape(%q)) = %q, %v", name, got, ok)
		}
	}
	for _, child := range []string{"%ZZ", "%", "a:b", "a%3ab", "%2e", "%61"} {
		if name, ok := unescape(child); ok {
			t.Errorf("unescape(%q) = %q, ok; want not a name as escape writes it", child, name)
		}
	}
}
