package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/seam"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
)

// commandCalls returns how often rdb's server ran cmd (INFO commandstats).
func commandCalls(t *testing.T, rdb redis.Cmdable, cmd string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// holdMany acquires names on c with a fixed lease, 16 at a time.
func holdMany(t *testing.T, c *dlock.Client, names []string) {
	t.Helper()
	ctx := context.Background()
	todo := make(chan string, len(names))
	for _, n := range names {
		todo <- n
	}
	close(todo)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range todo {
				if _, err := c.Mutex(n).Acquire(ctx, dlock.Wait(0), dlock.LeaseTime(5*time.Minute)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// 10 000 held locks among other keys: List finds exactly the matching ones,
// by SCAN and never KEYS, oldest first.
func TestListTenThousand(t *testing.T) {
	rdb := server(t)
	holder := newClient(t, rdb, dlock.Config{Label: "holder"})
	ops := newClient(t, rdb)
	ctx := context.Background()

	old, err := holder.Lock("stock:old").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // its Since is older than any other's
	names := make([]string, 0, 10500)
	for i := range 9998 {
		names = append(names, "stock:"+strconv.Itoa(i))
	}
	for i := range 500 {
		names = append(names, "order:"+strconv.Itoa(i))
	}
	holdMany(t, holder, names)
	// An RWLock held by readers only keeps no main key.
	if _, err := holder.RWLock("stock:read").ReadLock().Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	// Keys List must not report: plain keys, a free lock's fence counter
	// and a foreign value under the prefix.
	if err := rdb.Set(ctx, "stock:plain", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := holder.Mutex("stock:freed").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.SAdd(ctx, "dlock:{stock:foreign}", "x").Err(); err != nil {
		t.Fatal(err)
	}

	keysBefore := commandCalls(t, rdb, "keys")
	scansBefore := commandCalls(t, rdb, "scan")
	infos, err := ops.List(ctx, "stock:*")
	if err != nil {
		t.Fatal(err)
	}
	if got := commandCalls(t, rdb, "keys"); got != keysBefore {
		t.Fatalf("List ran KEYS %d times", got-keysBefore)
	}
	if scans := commandCalls(t, rdb, "scan") - scansBefore; scans < 10 {
		t.Fatalf("List ran SCAN %d times over ~21000 keys, want >= 10 (COUNT 1000 per call)", scans)
	}
	if len(infos) != 10000 {
		t.Fatalf("List(stock:*) = %d locks, want 10000", len(infos))
	}
	if !slices.ContainsFunc(infos, func(i dlock.Info) bool { return i.Name == "stock:read" }) {
		t.Fatalf("the read-held RWLock is not listed")
	}
	if infos[0].Name != "stock:old" || infos[0].Shape != "lock" || infos[0].Holders[0].Fence != old.Token() {
		t.Fatalf("oldest = %+v, want stock:old (lock, token %d)", infos[0], old.Token())
	}
	seen := make(map[string]bool, len(infos))
	for i, info := range infos {
		if seen[info.Name] || !strings.HasPrefix(info.Name, "stock:") || info.Name == "stock:freed" || info.Name == "stock:foreign" {
			t.Fatalf("unexpected or repeated lock %q", info.Name)
		}
		seen[info.Name] = true
		if !info.Held || len(info.Holders) != 1 || info.Holders[0].Label != "holder" || (info.TTL <= 0 && info.Name != "stock:read") {
			t.Fatalf("%q: %+v, want held by label holder with a TTL", info.Name, info)
		}
		if i > 0 && infos[i-1].Holders[0].Since.After(info.Holders[0].Since) {
			t.Fatalf("not sorted by age at %d: %v after %v", i, info.Holders[0].Since, infos[i-1].Holders[0].Since)
		}
	}
	all, err := ops.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 10500 {
		t.Fatalf("List(\"\") = %d locks, want 10500", len(all))
	}
	one, err := ops.List(ctx, "order:49?")
	if err != nil {
		t.Fatal(err)
	}
	if len(one) != 10 {
		t.Fatalf("List(order:49?) = %d locks, want 10", len(one))
	}
}

// Glob characters in the prefix are matched literally; in the pattern they
// are globs unless escaped.
func TestListEscaping(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb, dlock.Config{Prefix: "app[1]*:"})
	other := newClient(t, rdb, dlock.Config{Prefix: "app1x:"})
	ctx := context.Background()
	holdMany(t, c, []string{"a*b", "axb"})
	holdMany(t, other, []string{"a*b"})
	infos, err := c.List(ctx, `a\*b`)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "a*b" {
		t.Fatalf(`List(a\*b) = %+v, want only a*b`, infos)
	}
	infos, err = c.List(ctx, "a*b")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("List(a*b) = %d locks, want 2 (a*b and axb, not the other prefix's)", len(infos))
	}
}

// On a Cluster, List scans every master.
func TestListCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	rdb := redistest.ClusterClient(t, cl)
	c := newClient(t, rdb)
	ctx := context.Background()
	names := make([]string, 300)
	for i := range names {
		names[i] = fmt.Sprintf("stock:%d", i)
	}
	holdMany(t, c, names)
	infos, err := c.List(ctx, "stock:*")
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != len(names) {
		t.Fatalf("List on the cluster = %d locks, want %d", len(infos), len(names))
	}
	for _, n := range cl.Nodes {
		node := redis.NewClient(&redis.Options{Addr: n.Addr()})
		calls, keys := commandCalls(t, node, "scan"), commandCalls(t, node, "keys")
		_ = node.Close()
		if calls == 0 || keys != 0 {
			t.Fatalf("master %s: %d SCAN and %d KEYS calls, want SCAN and no KEYS on every master", n.Addr(), calls, keys)
		}
	}
}

func TestListBadInput(t *testing.T) {
	c := newClient(t, server(t))
	if _, err := c.List(context.Background(), strings.Repeat("*", seam.MaxNameLen+1)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("List(long pattern) = %v, want ErrInvalidArgument", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.List(ctx, "*"); !errors.Is(err, context.Canceled) {
		t.Fatalf("List(cancelled ctx) = %v, want context.Canceled", err)
	}
}
