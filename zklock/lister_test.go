package zklock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/zkproc"
)

// listerRoot returns a root of t's own.
func listerRoot(t *testing.T) string {
	return fmt.Sprintf("/lister-%d-%d", time.Now().UnixNano(), len(t.Name()))
}

// showInfos writes infos one a line, for a failure's message.
func showInfos(infos []dlock.Info) string {
	var b strings.Builder
	for _, i := range infos {
		fmt.Fprintf(&b, "\n\t%+v", i)
	}
	return b.String()
}

// sameAsList waits until two Client.List calls around a Lister.List agree
// (nothing changed meanwhile) and fails t unless the Lister's agrees with
// them; it returns what they listed.
func sameAsList(t *testing.T, ctx context.Context, c *Client, l *Lister, pattern, step string) []dlock.Info {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		before, err := c.List(ctx, pattern)
		if err != nil {
			t.Fatalf("%s: Client.List: %v", step, err)
		}
		got, err := l.List(ctx, pattern)
		if err != nil {
			t.Fatalf("%s: Lister.List: %v", step, err)
		}
		after, err := c.List(ctx, pattern)
		if err != nil {
			t.Fatalf("%s: Client.List: %v", step, err)
		}
		if reflect.DeepEqual(before, after) {
			if !reflect.DeepEqual(got, before) {
				t.Fatalf("%s: Lister.List(%q):%s\nClient.List:%s", step, pattern, showInfos(got), showInfos(before))
			}
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the locks keep changing", step)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// summary returns the names of infos, and the number of holders and of
// waiters of each ("name h/w").
func summary(infos []dlock.Info) []string {
	var out []string
	for _, i := range infos {
		out = append(out, fmt.Sprintf("%s %d/%d", i.Name, len(i.Holders), len(i.Queue)))
	}
	slices.Sort(out)
	return out
}

// acquireLater starts an Acquire of lk that will wait, and returns its
// result's channel once its node is queued in dir (n nodes there).
func acquireLater(t *testing.T, ctx context.Context, c *Client, lk dlock.Locker, family, name string, n int) <-chan *dlock.Lease {
	t.Helper()
	got := make(chan *dlock.Lease, 1)
	go func() {
		lease, err := lk.Acquire(ctx)
		if err != nil && !errors.Is(err, dlock.ErrClosed) && ctx.Err() == nil { // not the test's end
			t.Error(err)
		}
		got <- lease
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(members(t, c, family, name)) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d nodes, want %d", name, len(members(t, c, family, name)), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return got
}

// TestListerFollowsChanges: after each change of the locks under a root a
// Lister's List returns what Client.List returns: a Mutex granted, a
// waiter queued, a release that hands the lock on, a Lock, an RWLock read
// with a write waiter, a Semaphore's permits, nodes that are no lock
// (Foreign, not listed), a holder whose client closes.
func TestListerFollowsChanges(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	const timeout = 4 * time.Second
	root := listerRoot(t)
	lc := dial(t, timeout, Config{Prefix: root})
	a := dial(t, timeout, Config{Prefix: root, Label: "a"})
	b := dial(t, timeout, Config{Prefix: root, Label: "b"})
	l := lc.NewLister()
	defer l.Close()
	check := func(step string, want ...string) {
		t.Helper()
		got := summary(sameAsList(t, ctx, lc, l, "*", step))
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: listed %v, want %v", step, got, want)
		}
	}
	check("empty root")

	m1, err := a.Mutex("m").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	check("a Mutex granted", "m 1/0")
	next := acquireLater(t, ctx, lc, b.Mutex("m"), familyLock, "m", 2)
	check("a waiter queued", "m 1/1")
	if err := m1.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	m2 := <-next
	if m2 == nil {
		t.FailNow()
	}
	check("handed on", "m 1/0")
	if infos, _ := l.List(ctx, "m"); len(infos) != 1 || infos[0].Holders[0].Fence != m2.Token() {
		t.Fatalf("the new holder: %+v, want fence %d", infos, m2.Token())
	}

	if _, err := a.Lock("l").Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	check("a Lock", "m 1/0", "l 1/0")
	if _, err := a.RWLock("rw").ReadLock().Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	check("an RWLock read", "m 1/0", "l 1/0", "rw 1/0")
	writer := acquireLater(t, ctx, lc, b.RWLock("rw").WriteLock(), familyLock, "rw", 2)
	check("a write waiter", "m 1/0", "l 1/0", "rw 1/1")
	for range 2 {
		if _, err := a.Semaphore("s", 3).Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	infos := sameAsList(t, ctx, lc, l, "s", "a Semaphore")
	if len(infos) != 1 || infos[0].Permits != 3 || len(infos[0].Holders) != 2 {
		t.Fatalf("the Semaphore: %s", showInfos(infos))
	}
	if err := b.Semaphore("s", 3).SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if infos := sameAsList(t, ctx, lc, l, "s", "a Semaphore's count set"); len(infos) != 1 || infos[0].Permits != 2 {
		t.Fatalf("the Semaphore: %s", showInfos(infos))
	}
	check("a Semaphore", "m 1/0", "l 1/0", "rw 1/1", "s 2/0")
	if f := l.Foreign(); len(f) != 0 {
		t.Fatalf("Foreign() = %q, want none", f)
	}

	// Nodes that are no lock: shown by Foreign, not by List.
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{"/junk", "/lock/%zz", "/lock/m/junk", "/permits/%zz"} {
		if _, err := lc.conn.Create(root+p, nil, 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	check("foreign nodes", "m 1/0", "l 1/0", "rw 1/1", "s 2/0")
	if f, want := l.Foreign(), []string{"junk", "lock/%zz", "lock/m/junk", "permits/%zz"}; !slices.Equal(f, want) {
		t.Fatalf("Foreign() = %q, want %q", f, want)
	}
	if _, err := l.List(ctx, "[lr]*"); err != nil {
		t.Fatal(err)
	}
	if f := l.Foreign(); len(f) != 0 {
		t.Fatalf("Foreign() after List(\"[lr]*\") = %q, want none (of no name, or of a name not matched)", f)
	}
	if _, err := l.List(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if f, want := l.Foreign(), []string{"lock/m/junk"}; !slices.Equal(f, want) {
		t.Fatalf("Foreign() after List(\"m\") = %q, want %q", f, want)
	}
	if err := lc.conn.Delete(root+"/junk", -1); err != nil {
		t.Fatal(err)
	}
	check("a foreign node deleted", "m 1/0", "l 1/0", "rw 1/1", "s 2/0")
	if f, want := l.Foreign(), []string{"lock/%zz", "lock/m/junk", "permits/%zz"}; !slices.Equal(f, want) {
		t.Fatalf("Foreign() = %q, want %q", f, want)
	}

	// a's holds end with its session: the writer is granted.
	a.Close()
	w := <-writer
	if w == nil {
		t.FailNow()
	}
	check("a holder's client closed", "m 1/0", "rw 1/0")
	if infos, _ := l.List(ctx, "rw"); len(infos) != 1 || infos[0].Holders[0].Mode != "write" {
		t.Fatalf("rw after its reader left: %s", showInfos(infos))
	}
	if err := m2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	check("all released")
}

// replyTotal returns how many replies to requests the proxy has seen.
func (p *proxy) replyTotal() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, k := range p.replies {
		n += k
	}
	return n
}

// TestListerReadsChangesOnly: a List of locks that did not change since the
// last costs ZooKeeper a request or two, where Client.List reads each lock
// (requests counted by a proxy between the Lister's client and the
// server); a change to one lock shows at the next List, which reads that
// lock only.
func TestListerReadsChangesOnly(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	const timeout = 10 * time.Second // few pings
	const n = 200
	root := listerRoot(t)
	holder := dial(t, timeout, Config{Prefix: root})
	var leases []*dlock.Lease
	for i := range n {
		lease, err := holder.Mutex(fmt.Sprintf("lock-%03d", i)).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, lease)
	}
	p := newProxy(t, server.Addr())
	c := dialAddr(t, p.addr(), timeout, Config{Prefix: root})
	l := c.NewLister()
	defer l.Close()
	cost := func(what string, f func() []dlock.Info, want int) int {
		t.Helper()
		before := p.replyTotal()
		infos := f()
		if len(infos) != want {
			t.Fatalf("%s: %d locks, want %d", what, len(infos), want)
		}
		return p.replyTotal() - before
	}
	list := func(lst func(context.Context, string) ([]dlock.Info, error)) func() []dlock.Info {
		return func() []dlock.Info {
			infos, err := lst(ctx, "*")
			if err != nil {
				t.Fatal(err)
			}
			return infos
		}
	}
	first := cost("the first List", list(l.List), n)
	again := cost("a List again", list(l.List), n)
	whole := cost("Client.List", list(c.List), n)
	t.Logf("%d held locks: the first List %d requests, the next %d; Client.List %d", n, first, again, whole)
	if whole < 2*n || first < 2*n {
		t.Fatalf("Client.List %d requests, the first List %d: want each lock read (>= %d)", whole, first, 2*n)
	}
	if again > 3 {
		t.Fatalf("a List of %d unchanged locks cost %d requests, want at most 3", n, again)
	}

	// One lock changes hands: the next List shows it, reading that lock.
	if err := leases[7].Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	relock, err := holder.Mutex("lock-007").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []dlock.Info
	changed := cost("a List after a change", func() []dlock.Info { got = list(l.List)(); return got }, n)
	t.Logf("a List after one lock changed hands: %d requests", changed)
	for _, info := range got {
		if info.Name == "lock-007" && info.Holders[0].Fence != relock.Token() {
			t.Fatalf("lock-007 listed with fence %d, want %d (the new grant)", info.Holders[0].Fence, relock.Token())
		}
	}
	if changed > 6 {
		t.Fatalf("a List after one lock changed cost %d requests, want at most 6", changed)
	}
	if again := cost("a List again", list(l.List), n); again > 3 {
		t.Fatalf("a List of %d unchanged locks cost %d requests, want at most 3", n, again)
	}
	// A lock released: gone from the next List.
	if err := relock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if cost("a List after a release", list(l.List), n-1) > 6 {
		t.Fatal("a List after one release read more than that lock")
	}
}

// TestListerUnreachable: while the server is paused (SIGSTOP) a List fails
// within its ctx's deadline, and returns nothing it knew; once the server
// resumes, the first List that succeeds shows a change made after the
// resume, whether the session outlived the pause (a reconnection) or not
// (a new session). The Lister's client reaches the server through a proxy
// that cuts its connection during the pause, so that it surely reconnects
// (and, to end its session, keeps it from reconnecting until the server
// expired it).
func TestListerUnreachable(t *testing.T) {
	ctx := testCtx(t, 3*time.Minute)
	s, err := zkproc.Start(ctx, zkproc.Options{TickTime: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const timeout = 2 * time.Second
	for _, expire := range []bool{false, true} {
		t.Run(map[bool]string{false: "reconnected", true: "expired"}[expire], func(t *testing.T) {
			root := listerRoot(t)
			p := newProxy(t, s.Addr())
			c := dialAddr(t, p.addr(), timeout, Config{Prefix: root})
			other := dialAddr(t, s.Addr(), 10*time.Second, Config{Prefix: root})
			l := c.NewLister()
			defer l.Close()
			sid := c.conn.SessionID()
			before, err := other.Mutex("before").Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if infos, err := l.List(ctx, "*"); err != nil || len(infos) != 1 {
				t.Fatalf("List = %s, %v; want the lock before", showInfos(infos), err)
			}
			back := c.reconn.next()
			if err := s.Pause(); err != nil {
				t.Fatal(err)
			}
			resumed := false
			defer func() {
				if !resumed {
					s.Resume()
				}
			}()
			lctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			start := time.Now()
			infos, err := l.List(lctx, "*")
			cancel()
			if err == nil || infos != nil {
				t.Fatalf("List while the server is paused = %s, %v; want an error and nothing", showInfos(infos), err)
			}
			if took := time.Since(start); took > time.Second {
				t.Fatalf("List while the server is paused took %v (ctx 300ms)", took)
			}
			t.Logf("List while paused: %v", err)
			p.refuse(expire)
			p.cut()
			if err := s.Resume(); err != nil {
				t.Fatal(err)
			}
			resumed = true
			if expire { // the server expires the session it no longer hears from
				time.Sleep(timeout + 4*500*time.Millisecond)
				p.refuse(false)
			}
			// The change after the resume: the lock before released, one after
			// taken (other's session outlives the pause).
			if err := before.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			after, err := other.Mutex("after").Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer after.Unlock(ctx)
			deadline := time.Now().Add(30 * time.Second)
			for {
				lctx, cancel := context.WithTimeout(ctx, time.Second)
				infos, err := l.List(lctx, "*")
				cancel()
				if err == nil {
					if got := summary(infos); !slices.Equal(got, []string{"after 1/0"}) || infos[0].Holders[0].Fence != after.Token() {
						t.Fatalf("the first List after the resume = %s, want the lock after (fence %d) alone", showInfos(infos), after.Token())
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no List in 30s after the resume: %v", err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			select {
			case <-back:
			default:
				t.Fatal("the Lister's client did not reconnect")
			}
			if kept := c.conn.SessionID() == sid; kept == expire {
				t.Fatalf("session kept %v, want %v", kept, !expire)
			}
		})
	}
}

// TestListerClose: a List after the Lister's Close, or its Client's,
// returns dlock.ErrClosed; Close twice is fine.
func TestListerClose(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	c := dial(t, 4*time.Second, Config{Prefix: listerRoot(t)})
	l := c.NewLister()
	if _, err := l.List(ctx, "*"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.List(ctx, "*"); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("List after Close = %v, want ErrClosed", err)
	}
	l2 := c.NewLister()
	defer l2.Close()
	if _, err := l2.List(ctx, strings.Repeat("x", 1025)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("List of a pattern too long = %v, want ErrInvalidArgument", err)
	}
	c.Close()
	if _, err := l2.List(ctx, "*"); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("List after the Client's Close = %v, want ErrClosed", err)
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
	c := dial(b, 10*time.Second)
	prefix := "bench-list:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	for i := range held {
		if _, err := c.Mutex(prefix + strconv.Itoa(i)).Acquire(ctx); err != nil {
			b.Fatal(err)
		}
	}
	v := dial(b, 10*time.Second) // the view's own client, as dlock top has
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
