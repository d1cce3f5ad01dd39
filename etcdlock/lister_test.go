package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/etcdproc"
)

// describe returns info without its TTLs, which are read at another time
// by each List (sameInfos compares them apart).
func describe(info dlock.Info) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s held=%v permits=%d last=%d", info.Name, info.Shape, info.Held, info.Permits, info.LastFence)
	for _, h := range info.Holders {
		fmt.Fprintf(&b, " [h %s %d %q x%d %s/%d %q %d]", h.ID, h.Fence, h.Mode, h.Count, h.Host, h.PID, h.Label, h.Since.UnixMilli())
	}
	for _, w := range info.Queue {
		fmt.Fprintf(&b, " [w %s %q %s/%d %q %d deadline=%v]", w.ID, w.Mode, w.Host, w.PID, w.Label, w.Since.UnixMilli(), w.Deadline >= 0)
	}
	return b.String()
}

// sameInfos fails t unless got (a Lister's) is want (Client.List's): the
// same locks in the same order, TTLs within a second.
func sameInfos(t *testing.T, step string, got, want []dlock.Info) {
	t.Helper()
	near := func(a, b time.Duration) bool { return (a < 0) == (b < 0) && max(a-b, b-a) <= time.Second }
	if len(got) != len(want) {
		t.Fatalf("%s: Lister.List = %d locks, Client.List %d:\n%v\n%v", step, len(got), len(want), got, want)
	}
	for i := range got {
		if g, w := describe(got[i]), describe(want[i]); g != w {
			t.Fatalf("%s: lock %d:\nLister.List %s\nClient.List %s", step, i, g, w)
		}
		if !near(got[i].TTL, want[i].TTL) {
			t.Errorf("%s: %s TTL %v, Client.List %v", step, got[i].Name, got[i].TTL, want[i].TTL)
		}
		for j, h := range got[i].Holders {
			if w := want[i].Holders[j].TTL; !near(h.TTL, w) {
				t.Errorf("%s: %s holder %d TTL %v, Client.List %v", step, got[i].Name, j, h.TTL, w)
			}
		}
		for j, q := range got[i].Queue {
			if w := want[i].Queue[j].Deadline; !near(q.Deadline, w) {
				t.Errorf("%s: %s waiter %d deadline %v, Client.List %v", step, got[i].Name, j, q.Deadline, w)
			}
		}
	}
}

// listBoth lists pattern with Client.List, then with the Lister, fails t
// unless they agree, and returns the Lister's.
func listBoth(t *testing.T, ctx context.Context, step string, c *Client, l *Lister, pattern string) []dlock.Info {
	t.Helper()
	want, err := c.List(ctx, pattern)
	if err != nil {
		t.Fatalf("%s: Client.List: %v", step, err)
	}
	got, err := l.List(ctx, pattern)
	if err != nil {
		t.Fatalf("%s: Lister.List: %v", step, err)
	}
	sameInfos(t, step, got, want)
	return got
}

// summary returns each lock of infos as "name shape holders/waiters".
func summary(infos []dlock.Info) []string {
	s := make([]string, len(infos))
	for i, info := range infos {
		s[i] = fmt.Sprintf("%s %s %d/%d", info.Name, info.Shape, len(info.Holders), len(info.Queue))
	}
	slices.Sort(s)
	return s
}

func wantSummary(t *testing.T, step string, infos []dlock.Info, want ...string) {
	t.Helper()
	if got := summary(infos); !slices.Equal(got, want) {
		t.Fatalf("%s: the Lister listed %q, want %q", step, got, want)
	}
}

// acquireLater starts Acquire of l in a goroutine; its outcome comes on the
// channel.
func acquireLater(ctx context.Context, l dlock.Locker) <-chan *dlock.Lease {
	ch := make(chan *dlock.Lease, 1)
	go func() {
		lease, _ := l.Acquire(ctx, dlock.Wait(60*time.Second))
		ch <- lease
	}()
	return ch
}

// After every kind of change, a Lister lists what Client.List lists, and
// reports the keys of no lock in Foreign.
func TestListerFollowsChanges(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	prefix := "lister-" + lockName(t) + "/"
	c := newClient(t, Config{Prefix: prefix})
	a := newClient(t, Config{Prefix: prefix, Label: "a"})
	b := newClient(t, Config{Prefix: prefix, Label: "b"})
	l := c.NewLister()
	defer l.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	step := func(name string, want ...string) []dlock.Info {
		t.Helper()
		infos := listBoth(t, ctx, name, c, l, "*")
		wantSummary(t, name, infos, want...)
		return infos
	}
	step("nothing")

	ma, err := a.Mutex("m").Acquire(ctx)
	must(err)
	first := step("a Mutex granted", "m mutex 1/0")
	mb := acquireLater(ctx, b.Mutex("m"))
	awaitKeys(t, c.cli, c.dir("mutex", "m"), "the waiter", func(ks []*keyInfo) bool { return len(ks) == 2 })
	step("a waiter queued", "m mutex 1/1")
	must(ma.Unlock(ctx))
	if <-mb == nil {
		t.Fatal("the waiter was not granted the Mutex")
	}
	handed := step("handed on to the waiter", "m mutex 1/0")
	if handed[0].Holders[0].Label != "b" || handed[0].Holders[0].Fence <= first[0].Holders[0].Fence {
		t.Fatalf("after the hand-over: %v, before %v", handed[0].Holders, first[0].Holders)
	}

	_, err = a.Lock("lk").Acquire(ctx)
	must(err)
	step("a Lock", "lk lock 1/0", "m mutex 1/0")

	_, err = a.RWLock("rw").ReadLock().Acquire(ctx)
	must(err)
	acquireLater(ctx, b.RWLock("rw").WriteLock())
	awaitKeys(t, c.cli, c.dir("rw", "rw"), "the writer", func(ks []*keyInfo) bool { return len(ks) == 2 })
	infos := step("an RWLock read, a writer waiting", "lk lock 1/0", "m mutex 1/0", "rw rw 1/1")
	if i := slices.IndexFunc(infos, func(i dlock.Info) bool { return i.Name == "rw" }); infos[i].Holders[0].Mode != "read" || infos[i].Queue[0].Mode != "write" {
		t.Fatalf("rw: %s", describe(infos[i]))
	}

	_, err = a.Semaphore("sem", 2).Acquire(ctx)
	must(err)
	_, err = b.Semaphore("sem", 2).Acquire(ctx)
	must(err)
	acquireLater(ctx, a.Semaphore("sem", 2))
	awaitKeys(t, c.cli, c.dir("semaphore", "sem"), "the third", func(ks []*keyInfo) bool { return len(ks) == 3 })
	infos = step("a Semaphore of 2 permits, one waiting", "lk lock 1/0", "m mutex 1/0", "rw rw 1/1", "sem semaphore 2/1")
	if i := slices.IndexFunc(infos, func(i dlock.Info) bool { return i.Name == "sem" }); infos[i].Permits != 2 {
		t.Fatalf("sem: %s", describe(infos[i]))
	}

	// Keys of no lock, which Client.List leaves out too.
	unnamed := []string{"junk", "mark/junk", "mutex/stock:x", "mutex/07:stock:x/a", "permits/7:x", "x/mutex/1:a/h"}
	for _, k := range unnamed {
		_, err := c.cli.Put(ctx, prefix+k, "x")
		must(err)
	}
	all := []string{"lk lock 1/0", "m mutex 1/0", "rw rw 1/1", "sem semaphore 2/1"}
	step("foreign keys", all...)
	slices.Sort(unnamed)
	if got := l.Foreign(); !slices.Equal(got, unnamed) {
		t.Fatalf("Foreign() = %q, want %q", got, unnamed)
	}
	wantSummary(t, "pattern m", listBoth(t, ctx, "pattern m", c, l, "m"), "m mutex 1/0")
	if got := l.Foreign(); len(got) != 0 {
		t.Fatalf("Foreign() after List(m) = %q, want none (their keys name no lock)", got)
	}

	// A List shows every change committed before it began, however soon
	// after it, and however late the watch delivers it.
	l.mu.Lock()
	l.watchDelay = 50 * time.Millisecond
	l.drop() // read again, and watched with the delay
	l.mu.Unlock()
	for i := range 10 {
		k := fmt.Sprintf("then/%02d", i)
		_, err := c.cli.Put(ctx, prefix+k, "x")
		must(err)
		_, err = l.List(ctx, "")
		must(err)
		if !slices.Contains(l.Foreign(), k) {
			t.Fatalf("List right after %s was put: Foreign() = %q", k, l.Foreign())
		}
	}
	_, err = c.cli.Delete(ctx, prefix+"then/", clientv3.WithPrefix())
	must(err)

	// A key in a lock's directory of no holder's layout names its lock:
	// foreign, shown for the patterns that match the name. (Client.List
	// reads it as a holder of "q".)
	named := []string{"mutex/1:q/a/b", "rw/1:q/x/h"}
	for _, k := range named {
		_, err := c.cli.Put(ctx, prefix+k, "x")
		must(err)
	}
	for _, tc := range []struct {
		pattern string
		want    []string
	}{{"*", slices.Sorted(slices.Values(append(slices.Clone(unnamed), named...)))}, {"q", named}, {"?", named}, {"m", nil}} {
		infos, err := l.List(ctx, tc.pattern)
		must(err)
		if slices.ContainsFunc(infos, func(i dlock.Info) bool { return i.Name == "q" }) {
			t.Fatalf("List(%q) lists the foreign keys of q: %v", tc.pattern, summary(infos))
		}
		if got := l.Foreign(); !slices.Equal(got, tc.want) {
			t.Fatalf("Foreign() after List(%q) = %q, want %q", tc.pattern, got, tc.want)
		}
	}

	// Keys deleted: foreign ones, and a holder's.
	for _, k := range append(named, "junk") {
		_, err := c.cli.Delete(ctx, prefix+k)
		must(err)
	}
	_, err = c.cli.Delete(ctx, c.dir("lock", "lk"), clientv3.WithPrefix())
	must(err)
	step("keys deleted", "m mutex 1/0", "rw rw 1/1", "sem semaphore 2/1")
	if got, want := l.Foreign(), unnamed[1:]; !slices.Equal(got, want) {
		t.Fatalf("Foreign() = %q, want %q", got, want)
	}

	// b's client closed: its lease revoked, its keys gone.
	must(b.Close())
	awaitKeys(t, c.cli, c.dir("mutex", "m"), "b's keys gone", func(ks []*keyInfo) bool { return len(ks) == 0 })
	awaitKeys(t, c.cli, c.dir("rw", "rw"), "b's keys gone", func(ks []*keyInfo) bool { return len(ks) == 1 })
	infos = step("a holder's client closed", "rw rw 1/0", "sem semaphore 2/0")
	for _, info := range infos {
		for _, h := range info.Holders {
			if h.Label != "a" {
				t.Fatalf("%s still held by %s", info.Name, h.Label)
			}
		}
	}
	if l.reads != 2 {
		t.Errorf("the Lister read every key %d times, want twice (once dropped on purpose)", l.reads)
	}
}

// calls counts the etcd requests of a client by method, and its open watch
// streams.
type calls struct {
	mu      sync.Mutex
	unary   map[string]int
	watches int
}

func (cs *calls) reset() map[string]int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	u := cs.unary
	cs.unary = map[string]int{}
	return u
}

func (cs *calls) openWatches() int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.watches
}

// countedClient returns an etcd client of the shared member whose
// requests cs counts, closed at t's cleanup.
func countedClient(t *testing.T, cs *calls) *clientv3.Client {
	cs.unary = map[string]int{}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		cs.mu.Lock()
		cs.unary[method]++
		cs.mu.Unlock()
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil || !strings.HasSuffix(method, "/Watch") {
			return s, err
		}
		cs.mu.Lock()
		cs.watches++
		cs.mu.Unlock()
		return &countedStream{ClientStream: s, cs: cs}, nil
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: server.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(unary), grpc.WithChainStreamInterceptor(stream)},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// awaitWatches reports whether cs counts n open watch streams within 5 s.
func awaitWatches(cs *calls, n int) bool {
	for deadline := time.Now().Add(5 * time.Second); cs.openWatches() != n; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// countedStream is a watch stream, counted until it ends.
type countedStream struct {
	grpc.ClientStream
	cs   *calls
	once sync.Once
}

func (s *countedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.once.Do(func() {
			s.cs.mu.Lock()
			s.cs.watches--
			s.cs.mu.Unlock()
		})
	}
	return err
}

// A List of many unchanged locks held by two clients costs etcd a read of
// the revision and a lease lookup per client, where Client.List reads each
// lock; a change to one of them shows at the next List.
func TestListerReadsOnlyChanges(t *testing.T) {
	ctx := testCtx(t, 90*time.Second)
	prefix := "lister-" + lockName(t) + "/"
	var cs calls
	c := newClientOn(t, countedClient(t, &cs), Config{Prefix: prefix})
	holders := []*Client{newClient(t, Config{Prefix: prefix}), newClient(t, Config{Prefix: prefix})}
	const n = 100
	leases := make([]*dlock.Lease, n)
	for i := range n {
		var err error
		if leases[i], err = holders[i%2].Mutex(fmt.Sprintf("m%03d", i)).Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	l := c.NewLister()
	defer l.Close()
	cs.reset()
	infos := listBoth(t, ctx, "first", c, l, "")
	if len(infos) != n {
		t.Fatalf("listed %d locks, want %d", len(infos), n)
	}
	cs.reset()
	for i := range 3 {
		infos, err := l.List(ctx, "m*")
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != n {
			t.Fatalf("listed %d locks, want %d", len(infos), n)
		}
		got := cs.reset()
		total := 0
		for _, k := range got {
			total += k
		}
		if got["/etcdserverpb.Lease/LeaseTimeToLive"] != 2 || total > 4 {
			t.Fatalf("List %d of %d unchanged locks of 2 clients: etcd requests %v, want a read and 2 lease lookups", i, n, got)
		}
	}
	if _, err := c.List(ctx, "m*"); err != nil {
		t.Fatal(err)
	}
	if got := cs.reset(); got["/etcdserverpb.KV/Txn"] < n || got["/etcdserverpb.Lease/LeaseTimeToLive"] < n {
		t.Fatalf("Client.List's requests %v: the comparison is void", got)
	}

	// One lock changes hands.
	if err := leases[7].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := holders[0].Mutex("m007").Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	infos = listBoth(t, ctx, "a lock changed hands", c, l, "m*")
	i := slices.IndexFunc(infos, func(i dlock.Info) bool { return i.Name == "m007" })
	if i < 0 || infos[i].Holders[0].Fence <= leases[7].Token() {
		t.Fatalf("m007 after it changed hands: %v (the old token %d)", infos, leases[7].Token())
	}
	if !awaitWatches(&cs, 1) || l.reads != 1 {
		t.Fatalf("%d watch streams open, %d whole reads: want 1 and 1", cs.openWatches(), l.reads)
	}
}

// With its etcd paused, List fails within its deadline rather than list
// what it knew; once etcd is back, List shows the changes made since.
func TestListerUnreachable(t *testing.T) {
	sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	cl, err := etcdproc.Start(sctx, etcdproc.Options{FastElection: true, NoFsync: true})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Error(err)
		}
	})
	ctx := testCtx(t, 90*time.Second)
	c := newClientOn(t, etcdClient(t, cl.Endpoints()...))
	h := newClientOn(t, etcdClient(t, cl.Endpoints()...))
	if _, err := h.Mutex("before").Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	l := c.NewLister()
	defer l.Close()
	wantSummary(t, "before the pause", listBoth(t, ctx, "before the pause", c, l, ""), "before mutex 1/0")

	if err := cl.Members[0].Pause(); err != nil {
		t.Fatal(err)
	}
	for i, pattern := range []string{"", "", "none"} { // "none": no lease to read either
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		start := time.Now()
		infos, err := l.List(lctx, pattern)
		cancel()
		if err == nil || infos != nil {
			t.Fatalf("List %d with etcd paused: %v, %v; want an error", i, summary(infos), err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("List %d with etcd paused took %v, past its deadline of 1s", i, took)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("List %d with etcd paused: %v, want the deadline's error", i, err)
		}
	}
	if err := cl.Members[0].Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Mutex("after").Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	wantSummary(t, "after the pause", listBoth(t, ctx, "after the pause", c, l, ""), "after mutex 1/0", "before mutex 1/0")
}

// When etcd compacted changes the Lister's watch had not delivered yet, the
// next List reads every key again, at once.
func TestListerCompacted(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	prefix := "lister-" + lockName(t) + "/"
	c := newClient(t, Config{Prefix: prefix})
	h := newClient(t, Config{Prefix: prefix})
	l := c.NewLister()
	defer l.Close()
	var lease *dlock.Lease
	l.afterRead = func() {
		l.afterRead = nil
		// Between the read and the watch: the watch starts at a compacted
		// revision.
		var err error
		if lease, err = h.Mutex("x").Acquire(ctx); err != nil {
			t.Error(err)
			return
		}
		resp, err := c.cli.Put(ctx, prefix+"bump", "x") // the acquisition's revision is compacted too
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := c.cli.Compact(ctx, resp.Header.Revision); err != nil {
			t.Error(err)
		}
	}
	if infos, err := l.List(ctx, ""); err != nil || len(infos) != 0 {
		t.Fatalf("the first List: %v, %v (it read before x)", summary(infos), err)
	}
	if t.Failed() {
		t.FailNow()
	}
	lctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	infos, err := l.List(lctx, "")
	if err != nil {
		t.Fatalf("the List after the compaction: %v", err)
	}
	wantSummary(t, "after the compaction", infos, "x mutex 1/0")
	if l.reads != 2 {
		t.Fatalf("the Lister read every key %d times, want twice", l.reads)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wantSummary(t, "a release after the new watch", listBoth(t, ctx, "a release after the new watch", c, l, ""))
}

// following reports whether a goroutine of a Lister's watch is running.
func following() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "(*Lister).follow")
}

// awaitFollowing reports whether a goroutine of a Lister's watch runs
// within 5 s (a goroutine just started may not have reached it).
func awaitFollowing() bool {
	for deadline := time.Now().Add(5 * time.Second); !following(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// Close ends the watch: a List after it returns ErrClosed, and no
// goroutine or watch stream of the Lister is left. Closing the Client does
// the same.
func TestListerClose(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	prefix := "lister-" + lockName(t) + "/"
	var cs calls
	c := newClientOn(t, countedClient(t, &cs), Config{Prefix: prefix})
	l := c.NewLister()
	if _, err := l.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := l.List(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if !awaitFollowing() || !awaitWatches(&cs, 1) {
		t.Fatalf("before Close: following %v, %d watch streams", following(), cs.openWatches())
	}
	if _, err := l.List(ctx, strings.Repeat("x", 1025)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("a pattern too long: %v", err)
	}
	var nilCtx context.Context
	if _, err := l.List(nilCtx, ""); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("a nil ctx: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if following() {
		t.Fatal("the watch goroutine runs on after Close")
	}
	if _, err := l.List(ctx, ""); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("List after Close: %v, want ErrClosed", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close again: %v", err)
	}
	if !awaitWatches(&cs, 0) {
		t.Fatalf("%d watch streams left open after Close", cs.openWatches())
	}

	l2 := c.NewLister()
	if _, err := l2.List(ctx, ""); err != nil || !awaitFollowing() {
		t.Fatalf("a second Lister: %v, following %v", err, following())
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if following() {
		t.Fatal("the watch goroutine runs on after the Client's Close")
	}
	if _, err := l2.List(ctx, ""); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("List after the Client's Close: %v, want ErrClosed", err)
	}
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
}

// The keys TestListKeys reads, through a Lister: the same locks, and the
// keys of no lock's layout — those of a Client whose prefix is nested
// under this one's among them — in Foreign.
func TestListerKeys(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	prefix := "lister-" + lockName(t) + "/"
	c := newClient(t, Config{Prefix: prefix})
	other := newClient(t, Config{Prefix: prefix + "x/"})
	for _, l := range []dlock.Locker{c.MultiLock("stock:3", "multi:x"), c.Mutex("dup"), c.Semaphore("dup", 1), other.Mutex("stock:other")} {
		lease, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer lease.Unlock(ctx)
	}
	bad := []string{"mutex/stock:x", "mutex/-1:stock:x/", "mutex/07:stock:x/a", "mutex/7:stock:x", "mutex/0:/a", "lock/99:stock:x/a"}
	for _, key := range bad {
		if _, err := c.cli.Put(ctx, prefix+key, "x"); err != nil {
			t.Fatal(err)
		}
	}
	l := c.NewLister()
	defer l.Close()
	wantSummary(t, "List(*)", listBoth(t, ctx, "List(*)", c, l, "*"), "dup mutex 1/0", "multi:x lock 1/0", "stock:3 lock 1/0")
	var want []string
	for _, kv := range keysIn(t, c.cli, prefix+"x/") { // other's key and its mark
		want = append(want, kv.key[len(prefix):])
	}
	if len(want) != 2 {
		t.Fatalf("the nested Client's keys: %q, want its key and its mark", want)
	}
	want = slices.Sorted(slices.Values(append(want, bad...)))
	if got := l.Foreign(); !slices.Equal(got, want) {
		t.Fatalf("Foreign() = %q, want %q", got, want)
	}
	wantSummary(t, "List(stock:*)", listBoth(t, ctx, "List(stock:*)", c, l, "stock:*"), "stock:3 lock 1/0")
	if got := l.Foreign(); len(got) != 0 {
		t.Fatalf("Foreign() after List(stock:*) = %q, want none: no key of them names a lock", got)
	}
}

// BenchmarkListReading is one reading of the live view (dlock top) of
// DLOCK_LIST_HELD (default 1000) Mutexes held by one Client, read by another: Client.List
// reads every lock each time; a Lister, only what changed (nothing here):
//
//	DLOCK_LIST_HELD=10000 go test -run '^$' -bench ListReading -count 3 .
func BenchmarkListReading(b *testing.B) {
	held := 1000
	if s := os.Getenv("DLOCK_LIST_HELD"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("DLOCK_LIST_HELD=%q: want a positive number", s)
		}
		held = n
	}
	ctx := context.Background()
	c := newClient(b)
	prefix := "bench-list:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	for i := range held {
		if _, err := c.Mutex(prefix + strconv.Itoa(i)).Acquire(ctx); err != nil {
			b.Fatal(err)
		}
	}
	v := newClient(b) // the view's own client, as dlock top has
	l := v.NewLister()
	defer l.Close()
	for _, s := range []struct {
		name string
		list func(ctx context.Context, pattern string) ([]dlock.Info, error)
	}{{"Client.List", v.List}, {"Lister", l.List}} {
		b.Run(s.name, func(b *testing.B) {
			if infos, err := s.list(ctx, prefix+"*"); err != nil || len(infos) != held { // the Lister's first reading reads all
				b.Fatalf("%d locks listed (%v), want %d", len(infos), err, held)
			}
			for b.Loop() {
				if infos, err := s.list(ctx, prefix+"*"); err != nil || len(infos) != held {
					b.Fatalf("%d locks listed (%v), want %d", len(infos), err, held)
				}
			}
		})
	}
}
