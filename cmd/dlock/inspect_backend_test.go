package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	dl "github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/etcdlock"
	"github.com/dlockgo/dlock/zklock"
)

// inspectServer starts the embedded server of kind and returns the flags
// that name it to inspect, and a function that makes a Semaphore of that
// backend (the backend package's clients hand out Mutex and Lock only).
func inspectServer(t *testing.T, kind string) (b *backend.Backend, flags []string, semaphore func(name string, permits int) dl.Locker) {
	t.Helper()
	ctx := context.Background()
	b, err := backend.Open(ctx, kind, "")
	if err != nil {
		t.Fatalf("embedded %s: %v", kind, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	switch kind {
	case backend.Redis:
		url, c := lockServerAt(t, b.Addr)
		return b, []string{"--redis", url}, func(n string, p int) dl.Locker { return c.Semaphore(n, p) }
	case backend.Etcd:
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{b.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		c, err := etcdlock.New(cli, etcdlock.Config{Label: "cli-test"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close(); _ = cli.Close() })
		return b, []string{"--backend", kind, "--etcd", b.Addr}, func(n string, p int) dl.Locker { return c.Semaphore(n, p) }
	case backend.ZooKeeper:
		c, err := zklock.Dial(ctx, b.Addr, zklock.Config{TTL: 2 * time.Second, Label: "cli-test"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return b, []string{"--backend", kind, "--zk", b.Addr}, func(n string, p int) dl.Locker { return c.Semaphore(n, p) }
	}
	t.Fatalf("no inspect fixture for backend %s", kind)
	return nil, nil, nil
}

// lockServerAt returns the Redis URL and a dlock Client (label "cli-test").
func lockServerAt(t *testing.T, url string) (string, *dl.Client) {
	t.Helper()
	b, err := backend.Open(context.Background(), backend.Redis, url)
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := b.RedisClient()
	if err != nil {
		t.Fatal(err)
	}
	c, err := dl.New(rdb, dl.Config{Label: "cli-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(); _ = rdb.Close() })
	return url, c
}

// The same Inspect answer from every backend: a Mutex held through a
// backend client, a Semaphore with both of its 2 permits taken, and a free
// name, read by `dlock inspect` for people and as JSON, with the same keys
// on all three; the server is named on stderr. Then --pattern lists the
// held locks that match, oldest first, on each.
func TestInspectOnEveryBackend(t *testing.T) {
	ctx := context.Background()
	host, _ := os.Hostname()
	keys := map[string][]string{}
	for _, kind := range backend.Kinds {
		t.Run(kind, func(t *testing.T) {
			b, flags, semaphore := inspectServer(t, kind)
			c, err := b.NewClient(ctx, backend.ClientOptions{Label: "cli-test"})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			inspect := func(name string, more ...string) (string, string) {
				t.Helper()
				code, out, stderr := dlock(t, append(append([]string{"inspect", name}, flags...), more...)...)
				if code != 0 {
					t.Fatalf("inspect %s on %s: exit %d: %s", name, kind, code, stderr)
				}
				return out, stderr
			}
			decode := func(out string) infoJSON {
				t.Helper()
				var info infoJSON
				if err := json.Unmarshal([]byte(out), &info); err != nil {
					t.Fatalf("not JSON: %v\n%s", err, out)
				}
				return info
			}

			mu, err := c.Mutex("stock:1001").Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out, stderr := inspect("stock:1001")
			if server := kind + ": "; !strings.HasPrefix(stderr, server+b.Addr+" (from --") {
				t.Errorf("stderr %q does not name the server %s", stderr, b.Addr)
			}
			tok := strconv.FormatInt(mu.Token(), 10)
			for _, want := range []string{`(?m)^state\s+held$`, `(?m)^shape\s+mutex$`, `(?m)^ttl\s+\d`, `holders \(1\)`,
				`(?m)^  \S{8}\s+` + regexp.QuoteMeta(host) + `\s+` + strconv.Itoa(os.Getpid()) + `\s+cli-test\s+.*ago\)\s+1\s+` + tok + `\b`} {
				if !regexp.MustCompile(want).MatchString(out) {
					t.Errorf("output does not match %q:\n%s", want, out)
				}
			}
			out, _ = inspect("stock:1001", "--json")
			info := decode(out)
			if !info.Held || info.Shape != "mutex" || info.Name != "stock:1001" || info.TTLMS <= 0 || len(info.Holders) != 1 {
				t.Fatalf("mutex --json: %+v", info)
			}
			if h := info.Holders[0]; h.Fence != mu.Token() || h.Count != 1 || h.Label != "cli-test" || h.PID != os.Getpid() || h.Host != host ||
				len(h.ID) != 8 || time.Since(h.Since) > time.Minute || time.Since(h.Since) < -time.Minute {
				t.Fatalf("mutex holder %+v, want token %d, count 1, label cli-test, pid %d, host %s", h, mu.Token(), os.Getpid(), host)
			}
			var raw map[string]json.RawMessage
			if err := json.Unmarshal([]byte(out), &raw); err != nil {
				t.Fatal(err)
			}
			for k := range raw {
				keys[kind] = append(keys[kind], k)
			}
			slices.Sort(keys[kind])
			if err := mu.Unlock(ctx); err != nil {
				t.Fatal(err)
			}

			sem := semaphore("sem:1", 2)
			var tokens []int64
			for range 2 {
				l, err := sem.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer l.Unlock(ctx)
				tokens = append(tokens, l.Token())
			}
			out, _ = inspect("sem:1", "--json")
			info = decode(out)
			var fences []int64
			for _, h := range info.Holders {
				fences = append(fences, h.Fence)
				if h.Label != "cli-test" || h.PID != os.Getpid() {
					t.Errorf("permit holder %+v", h)
				}
			}
			slices.Sort(fences)
			slices.Sort(tokens)
			if !info.Held || info.Shape != "semaphore" || info.Permits != 2 || !slices.Equal(fences, tokens) {
				t.Fatalf("semaphore with 2 of 2 permits taken (tokens %v): %+v", tokens, info)
			}
			out, _ = inspect("sem:1")
			if !regexp.MustCompile(`(?m)^permits\s+2$`).MatchString(out) || !strings.Contains(out, "holders (2):") {
				t.Errorf("semaphore, for people:\n%s", out)
			}

			out, _ = inspect("free:1")
			if !regexp.MustCompile(`(?m)^state\s+free$`).MatchString(out) {
				t.Errorf("free name:\n%s", out)
			}
			out, _ = inspect("free:1", "--json")
			if info := decode(out); info.Held || len(info.Holders) != 0 || strings.Contains(out, "null") {
				t.Errorf("free name --json:\n%s", out)
			}

			code, _, stderr := dlock(t, append([]string{"inspect", ""}, flags...)...)
			if code != exitUsage || !oneLineError(stderr) {
				t.Errorf("an invalid name: exit %d, %q; want 2", code, stderr)
			}

			// --pattern: the held locks that match, oldest first (stock:1001
			// was released: left out; sem:1 does not match).
			var stock []*dl.Lease
			for _, l := range []dl.Locker{c.Mutex("stock:1"), c.Lock("stock:2")} {
				lease, err := l.Acquire(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer lease.Unlock(ctx)
				stock = append(stock, lease)
				time.Sleep(5 * time.Millisecond) // distinct ages
			}
			code, out, stderr = dlock(t, append([]string{"inspect", "--pattern", "stock:*"}, flags...)...)
			if code != 0 || !strings.HasPrefix(stderr, kind+": "+b.Addr+" (from --") {
				t.Fatalf("--pattern stock:* on %s: exit %d, stderr %q", kind, code, stderr)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || lines[3] != "2 held locks" {
				t.Fatalf("--pattern stock:* on %s: want a header, 2 locks and a count:\n%s", kind, out)
			}
			for i, want := range []string{"stock:1 mutex", "stock:2 lock"} {
				f := strings.Fields(lines[i+1])
				if strings.Join(f[:2], " ") != want || f[5] != strconv.FormatInt(stock[i].Token(), 10) || !strings.Contains(lines[i+1], "cli-test") {
					t.Errorf("line %d = %q, want %s (token %d, cli-test), oldest first", i+1, lines[i+1], want, stock[i].Token())
				}
			}
			code, out, _ = dlock(t, append([]string{"inspect", "--pattern", "stock:*", "--limit", "1", "--json"}, flags...)...)
			var infos []infoJSON
			if err := json.Unmarshal([]byte(out), &infos); code != 0 || err != nil {
				t.Fatalf("--pattern --limit 1 --json on %s: exit %d, %v:\n%s", kind, code, err, out)
			}
			if len(infos) != 1 || infos[0].Name != "stock:1" || len(infos[0].Holders) != 1 || infos[0].Holders[0].Fence != stock[0].Token() {
				t.Errorf("--pattern stock:* --limit 1 --json on %s = %+v, want only stock:1", kind, infos)
			}
			code, out, _ = dlock(t, append([]string{"inspect", "--pattern", "none:*"}, flags...)...)
			if code != 0 || !strings.Contains(out, "no held locks match") {
				t.Errorf("--pattern none:* on %s: exit %d\n%s", kind, code, out)
			}
			code, _, stderr = dlock(t, append([]string{"inspect", "--pattern", strings.Repeat("*", 1025)}, flags...)...)
			if code != exitUsage || !oneLineError(stderr) || !strings.Contains(stderr, "pattern of 1025 bytes") {
				t.Errorf("a pattern too long on %s: exit %d, %q; want 2", kind, code, stderr)
			}
		})
	}
	if !slices.Equal(keys[backend.Etcd], keys[backend.Redis]) || !slices.Equal(keys[backend.ZooKeeper], keys[backend.Redis]) {
		t.Errorf("the JSON keys differ between backends: %v", keys)
	}
}

// unlock --force is Redis-only; --limit goes with --pattern; the flags of
// one backend with another are refused; each with exit 2 and one clear
// line. A server that does not answer is a runtime failure (exit 1).
func TestInspectBackendBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "a", "--limit", "1", "--backend", "zookeeper"}, "--limit goes with --pattern"},
		{[]string{"inspect", "a", "--limit", "1"}, "--limit goes with --pattern"},
		{[]string{"inspect", "--pattern", "x*", "--backend", "etcd", "--redis", "redis://127.0.0.1:1/0"}, "--redis is a flag of --backend redis"},
		{[]string{"unlock", "--force", "a", "--yes", "--backend", "etcd"}, "Redis-only"},
		{[]string{"unlock", "--force", "a", "--yes", "--backend", "zookeeper"}, "Redis-only"},
		{[]string{"unlock", "--force", "a", "--yes", "--zk", "127.0.0.1:1"}, "unknown flag: --zk"},
		{[]string{"inspect", "a", "--backend", "etcd", "--redis", "redis://127.0.0.1:1/0"}, "--redis is a flag of --backend redis"},
		{[]string{"inspect", "a", "--backend", "etcd", "--cluster"}, "--cluster"},
		{[]string{"inspect", "a", "--etcd", "127.0.0.1:1"}, "--etcd is a flag of --backend etcd"},
		{[]string{"inspect", "a", "--backend", "etcd", "--zk", "127.0.0.1:1"}, "--zk"},
		{[]string{"inspect", "a", "--backend", "mysql"}, "mysql"},
		{[]string{"inspect", "a", "--backend", "etcd", "--etcd", "nohostport"}, "nohostport"},
		{[]string{"inspect", "a", "--backend", "zookeeper", "--zk", ","}, "host:port"},
	} {
		code, _, stderr := dlock(t, tc.args...)
		if code != exitUsage || !oneLineError(stderr) || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want 2 and one line with %q", tc.args, code, stderr, tc.want)
		}
	}
	for _, args := range [][]string{
		{"inspect", "a", "--backend", "etcd", "--etcd", "127.0.0.1:1"},
		{"inspect", "a", "--backend", "zookeeper", "--zk", "127.0.0.1:1"},
		{"inspect", "--pattern", "x*", "--backend", "etcd", "--etcd", "127.0.0.1:1"},
		{"inspect", "--pattern", "x*", "--backend", "zookeeper", "--zk", "127.0.0.1:1"},
	} {
		code, _, stderr := dlock(t, args...)
		if code != exitError || !oneLineError(stderr) {
			t.Errorf("%v: exit %d, %q; want 1 (unreachable)", args, code, stderr)
		}
	}
}
