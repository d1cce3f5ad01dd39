package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/go-zookeeper/zk"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	dl "github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/top"
	"github.com/dlockgo/dlock/etcdlock"
	"github.com/dlockgo/dlock/zklock"
)

// getView reads /api/locks of the page at addr with query q.
func getView(t *testing.T, addr, q string) top.View {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/api/locks?" + q)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v top.View
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The page on every backend: a Mutex held and a waiter queued behind it
// (both through the backend's client), shown by /api/locks and in the
// page served without JavaScript, filtered by name and holder; a
// Semaphore's permits; nothing written to the service by the view.
func TestTopOnEveryBackend(t *testing.T) {
	for _, kind := range backend.Kinds {
		t.Run(kind, func(t *testing.T) {
			b, flags, semaphore := inspectServer(t, kind)
			ctx := context.Background()
			c, err := b.NewClient(ctx, backend.ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			l, err := c.Mutex("stock:1").Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Unlock(ctx)
			wctx, stop := context.WithCancel(ctx)
			type granted struct {
				l   *dl.Lease
				err error
			}
			waited := make(chan granted, 1)
			go func() { l, err := c.Mutex("stock:1").Acquire(wctx); waited <- granted{l, err} }()
			defer func() {
				stop()
				if g := <-waited; g.l != nil {
					_ = g.l.Unlock(ctx)
				}
			}()
			s, err := semaphore("pool", 3).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Unlock(ctx)

			junk := putForeign(t, b)

			addr := startTop(t, append(flags, "--every", "100ms")...)
			var v top.View
			waitFor(t, "the waiter shown", func() bool {
				v = getView(t, addr, "")
				return len(v.Locks) == 2 && lockOf(v, "stock:1") != nil && len(lockOf(v, "stock:1").Waiters) == 1
			})
			if !slices.Contains(v.Foreign, junk) {
				t.Errorf("foreign %q: want %q among them", v.Foreign, junk)
			}
			if !v.Reachable || v.Backend != kind {
				t.Errorf("reachable %v backend %q", v.Reachable, v.Backend)
			}
			m := lockOf(v, "stock:1")
			if m.Shape != "mutex" || len(m.Holders) != 1 || m.Holders[0].Fence != l.Token() || m.Holders[0].Host == "" {
				t.Errorf("stock:1 shown as %+v (token %d)", m, l.Token())
			}
			if p := lockOf(v, "pool"); p == nil || p.Shape != "semaphore" || p.Permits != 3 || len(p.Holders) != 1 {
				t.Errorf("pool shown as %+v", p)
			}
			if (m.UnlockCommand != "") != (kind == backend.Redis) {
				t.Errorf("unlock command %q on %s", m.UnlockCommand, kind)
			}
			if v := getView(t, addr, "name="+url.QueryEscape("stock:*")); len(v.Locks) != 1 || v.Locks[0].Name != "stock:1" {
				t.Errorf("filtered by name stock:*: %d locks", len(v.Locks))
			}
			if v := getView(t, addr, "holder=nobody-has-this"); len(v.Locks) != 0 {
				t.Errorf("filtered by an unknown holder: %d locks", len(v.Locks))
			}
			// The page without JavaScript is a snapshot of the same.
			resp, err := http.Get("http://" + addr + "/")
			if err != nil {
				t.Fatal(err)
			}
			page, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, want := range []string{`data-name="stock:1"`, `data-name="pool"`, `class="waiter"`, m.Holders[0].ID} {
				if !strings.Contains(string(page), want) {
					t.Errorf("the page has no %q", want)
				}
			}
			// In the browser: the holder and its waiter, live.
			bctx := browser(t)
			if err := chromedp.Do(bctx, chromedp.Navigate("http://"+addr+"/")); err != nil {
				t.Fatal(err)
			}
			poll[bool](t, bctx, "the page goes live", `document.querySelector("#live.on") !== null`, 10*time.Second)
			row := `document.querySelector('tr.lock[data-name="stock:1"]')`
			shown := poll[[]string](t, bctx, "holder and waiter shown",
				`(r => r && r.querySelector("li.waiter") && [r.querySelector("li.holder").dataset.fence, r.querySelector("li.waiter").dataset.id])(`+row+`)`, 10*time.Second)
			if shown[0] != strconv.FormatInt(l.Token(), 10) || shown[1] != m.Waiters[0].ID {
				t.Errorf("the browser shows holder token %s and waiter %s, want %d and %s", shown[0], shown[1], l.Token(), m.Waiters[0].ID)
			}
			// The view only reads: the lock is still held by the same grant.
			if err := l.Verify(ctx); err != nil {
				t.Errorf("the lock after the view: %v", err)
			}
			// A hand-on shows within 2 s: the waiter holds, nobody waits.
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			g := <-waited
			if g.err != nil {
				t.Fatalf("the waiter: %v", g.err)
			}
			waited <- g // unlocked at the end
			handedOn := time.Now()
			want := strconv.FormatInt(g.l.Token(), 10)
			poll[bool](t, bctx, "the hand-on to token "+want+" shown within 2 s",
				`(r => !!r && !r.querySelector("li.waiter") && r.querySelector("li.holder").dataset.fence === `+strconv.Quote(want)+`)(`+row+`)`,
				2*time.Second)
			t.Logf("the hand-on shown %v after the release", time.Since(handedOn).Round(time.Millisecond))
		})
	}
}

// putForeign writes under b's default prefix something that is no lock
// and returns how the view names it: a lock name whose key is a list on
// Redis, a key under the prefix on etcd, a node under the root on
// ZooKeeper.
func putForeign(t *testing.T, b *backend.Backend) string {
	t.Helper()
	ctx := context.Background()
	switch b.Kind {
	case backend.Redis:
		rdb, err := b.RedisClient()
		if err != nil {
			t.Fatal(err)
		}
		defer rdb.Close()
		if err := rdb.RPush(ctx, "dlock:{coupon:junk}", "x").Err(); err != nil {
			t.Fatal(err)
		}
		return "coupon:junk"
	case backend.Etcd:
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{b.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer cli.Close()
		if _, err := cli.Put(ctx, etcdlock.DefaultPrefix+"junk", "x"); err != nil {
			t.Fatal(err)
		}
		return "junk"
	case backend.ZooKeeper:
		conn, _, err := zk.Connect([]string{b.Addr}, 5*time.Second, zk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.Create(zklock.DefaultPrefix+"/junk", nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		return "junk"
	}
	t.Fatalf("no foreign key fixture for backend %s", b.Kind)
	return ""
}

func lockOf(v top.View, name string) *top.Lock {
	for i := range v.Locks {
		if v.Locks[i].Name == name {
			return &v.Locks[i]
		}
	}
	return nil
}

// --json prints one reading for scripts; --allow-unlock lets the page
// force-unlock a lock once its name is typed again, and only then.
func TestTopJSONAndUnlock(t *testing.T) {
	rurl, c := lockServer(t)
	ctx := context.Background()
	l, err := c.Mutex("coupon:7").Acquire(ctx, dl.LeaseTime(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// A key under the prefix that is no lock is shown as such.
	o, err := redis.ParseURL(rurl)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	defer rdb.Close()
	if err := rdb.RPush(ctx, "dlock:{coupon:junk}", "x").Err(); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := dlock(t, "top", "--redis", rurl, "--json", "--pattern", "coupon:*")
	if code != 0 {
		t.Fatalf("top --json: exit %d: %s", code, stderr)
	}
	var v top.View
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("top --json: %v\n%s", err, out)
	}
	if len(v.Locks) != 1 || v.Locks[0].Name != "coupon:7" || v.Locks[0].Holders[0].Fence != l.Token() || v.Locks[0].TTLMS <= 0 {
		t.Fatalf("top --json: %s", out)
	}
	if len(v.Foreign) != 1 || v.Foreign[0] != "coupon:junk" || v.ForeignCount != 1 {
		t.Fatalf("top --json: foreign %q (%d), want [coupon:junk]", v.Foreign, v.ForeignCount)
	}

	addr := startTop(t, "--redis", rurl, "--every", "100ms")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if strings.Contains(string(page), "Keys that are no lock") && strings.Contains(string(page), "<code>coupon:junk</code>") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page does not show the foreign key:\n%s", page)
		}
	}
	post := func(addr string, form url.Values) (int, string) {
		req, err := http.NewRequest("POST", "http://"+addr+"/api/unlock", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if form.Get("header") != "no" {
			req.Header.Set("X-Dlock-Unlock", "1")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := post(addr, url.Values{"name": {"coupon:7"}, "confirm": {"coupon:7"}}); code != http.StatusForbidden {
		t.Errorf("unlock without --allow-unlock: %d %s", code, body)
	}
	addr = startTop(t, "--redis", rurl, "--every", "100ms", "--allow-unlock")
	if code, body := post(addr, url.Values{"name": {"coupon:7"}, "confirm": {"coupon:7"}, "header": {"no"}}); code != http.StatusForbidden {
		t.Errorf("unlock posted by a form of another site (no header): %d %s", code, body)
	}
	if code, body := post(addr, url.Values{"name": {"coupon:7"}, "confirm": {"coupon:"}}); code != http.StatusBadRequest {
		t.Errorf("unlock with a wrong confirmation: %d %s", code, body)
	}
	if err := l.Verify(ctx); err != nil {
		t.Fatalf("the lock was removed without the name typed: %v", err)
	}
	if code, body := post(addr, url.Values{"name": {"coupon:7"}, "confirm": {"coupon:7"}}); code != http.StatusOK || !strings.Contains(body, "removed") {
		t.Errorf("unlock: %d %s", code, body)
	}
	if err := l.Verify(ctx); err == nil {
		t.Error("the lock is still held after the page's unlock")
	}
}

// Bad input is a one-line error and exit 2; a taken port too.
func TestTopBadInput(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rurl, _ := lockServer(t)
	for _, args := range [][]string{
		{"top", "--redis", rurl, "--listen", ln.Addr().String()},
		{"top", "--redis", rurl, "--listen", "nohostport"},
		{"top", "--redis", rurl, "--every", "0s"},
		{"top", "--redis", rurl, "--history", "1ms"},
		{"top", "--redis", rurl, "extra"},
		{"top", "--redis", "not a url"},
		{"top", "--backend", "etcd", "--allow-unlock"},
		{"top", "--redis", rurl, "--pattern", strings.Repeat("x", 1025)},
	} {
		code, _, stderr := dlock(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args[1:], code, stderr)
		}
		if strings.Count(strings.TrimSpace(stderr), "\n") > 1 { // the server line, then the error
			t.Errorf("%v: want a one-line error, got %q", args[1:], stderr)
		}
	}
	if _, _, stderr := dlock(t, "top", "--redis", rurl, "--listen", ln.Addr().String()); !strings.Contains(stderr, "in use") {
		t.Errorf("a taken port: %q", stderr)
	}
}
