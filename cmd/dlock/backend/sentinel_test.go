package backend_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/internal/redisproc"
)

// A Redis URL with master_name reaches the master through its Sentinels,
// and a client follows the master through a failover: a lock taken before
// the failover is on the old master, one taken after it on the new master,
// where a client of the new master's own address sees it held.
func TestRedisSentinelURL(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sent, err := redisproc.StartSentinel(ctx, redisproc.SentinelOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sent.Close()
	b := open(t, backend.Redis, sent.URL())
	if !strings.Contains(b.Desc, "via Sentinel "+sent.SentinelAddrs()[0]) || b.Embedded {
		t.Errorf("Desc %q, Embedded %v", b.Desc, b.Embedded)
	}
	c := client(t, b, "via-sentinel")
	// heldOn says whether reader, a client of one server's own address, sees
	// name held.
	heldOn := func(reader backend.Client, name string) bool {
		t.Helper()
		info, err := reader.Inspect(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return info.Held
	}
	reader := func(addr string) backend.Client {
		return client(t, open(t, backend.Redis, "redis://"+addr+"/0"), "reader")
	}

	before, err := c.Mutex("before").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !heldOn(reader(sent.Master.Addr()), "before") {
		t.Fatal("a lock taken through the Sentinels is not on the master")
	}
	if err := before.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sent.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	promoted, err := sent.WaitForFailover(ctx, sent.Master.Addr())
	if err != nil {
		t.Fatal(err)
	}
	onPromoted := reader(promoted)
	// The client learns the new master from the Sentinels; until it does,
	// the old one refuses writes (READONLY) or grants a lock the new master
	// never sees: take locks until one is on the new master.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		name := "after-" + string(rune('a'+i%26))
		l, err := c.Mutex(name).Acquire(ctx, dlock.Wait(time.Second))
		if err == nil {
			onNew := heldOn(onPromoted, name)
			_ = l.Unlock(ctx)
			if onNew {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no lock on the promoted master %s within 30 s of the failover (last: %v)", promoted, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A Sentinel URL that go-redis cannot read is refused as a bad address,
// before any connection.
func TestRedisSentinelURLBad(t *testing.T) {
	for _, url := range []string{
		"redis://127.0.0.1:1/0?master_name=",
		"redis://127.0.0.1:1/0?master_name=m&addr=no-port",
		"redis://127.0.0.1:1/x?master_name=m",
	} {
		if err := backend.CheckAddr(backend.Redis, url); !errors.Is(err, backend.ErrBadAddress) {
			t.Errorf("%q: %v, want ErrBadAddress", url, err)
		}
		if _, err := backend.NewRedisClient(url); !errors.Is(err, backend.ErrBadAddress) {
			t.Errorf("NewRedisClient(%q): %v, want ErrBadAddress", url, err)
		}
	}
}
