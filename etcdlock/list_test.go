package etcdlock

import (
	"maps"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

// What List reads on etcd (dlocktest's List test has the rest): the keys
// of each shape's directory, a name of two shapes listed once, a
// MultiLock's members as Locks (as Inspect reports them), and keys of no
// lock's layout or of a longer prefix left out.
func TestListKeys(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	prefix := "list-" + lockName(t) + "/"
	c := newClient(t, Config{Prefix: prefix})
	other := newClient(t, Config{Prefix: prefix + "x/"}) // its keys are under c's prefix, in no shape's directory
	for _, l := range []dlock.Locker{c.MultiLock("stock:3", "multi:x"), c.Mutex("dup"), c.Semaphore("dup", 1), other.Mutex("stock:other")} {
		lease, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Unlock(ctx)
	}
	for _, key := range []string{"mutex/stock:x", "mutex/-1:stock:x/", "mutex/07:stock:x/a", "mutex/7:stock:x", "mutex/0:/a", "lock/99:stock:x/a"} {
		if _, err := c.cli.Put(ctx, prefix+key, "x"); err != nil {
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
	if want := map[string]string{"stock:3": "lock", "multi:x": "lock", "dup": "mutex"}; !maps.Equal(got, want) {
		t.Errorf("List(*) = %v, want %v", got, want)
	}
}
