package zklock

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlockgo/dlock"
)

// What List reads on ZooKeeper (dlocktest's List test has the rest): the
// children of the family directories, a name of both families listed once,
// a MultiLock's members as Inspect reports them ("multi"), a released
// lock's directory (it stays) and children that are no escaped name left
// out, an empty root, a closed Client.
func TestListDirectories(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	const timeout = 3 * time.Second
	root := fmt.Sprintf("/list-%d", time.Now().UnixNano())
	c := dial(t, timeout, Config{Prefix: root})
	for _, l := range []dlock.Locker{c.MultiLock("stock:3", "multi:x"), c.Mutex("dup"), c.Semaphore("dup", 1)} {
		lease, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Unlock(ctx)
	}
	freed, err := c.Mutex("stock:freed").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := freed.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, child := range []string{"%ZZ", "stock:x", "stock%3ax"} {
		if _, err := c.conn.Create(root+"/"+familyLock+"/"+child, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.conn.Create(root+"/"+familyLock+"/"+child+"/w-0123456789abcdef-0000000001", []byte("mutex|"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	infos, err := c.List(ctx, "*")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, info := range infos {
		if _, twice := got[info.Name]; twice {
			t.Errorf("%s listed twice", info.Name)
		}
		got[info.Name] = info.Shape
	}
	if want := map[string]string{"stock:3": "multi", "multi:x": "multi", "dup": "mutex"}; !maps.Equal(got, want) {
		t.Errorf("List(*) = %v, want %v", got, want)
	}

	empty := dial(t, timeout, Config{Prefix: root + "-empty"})
	if infos, err := empty.List(ctx, "*"); err != nil || len(infos) != 0 {
		t.Errorf("List on an empty root = %+v, %v", infos, err)
	}
	empty.Close()
	if _, err := empty.List(context.Background(), "*"); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("List on a closed Client = %v, want ErrClosed", err)
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
