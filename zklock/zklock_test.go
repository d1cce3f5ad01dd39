package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/dlockgo/dlock/internal/zkproc"
)

var seq struct {
	sync.Mutex
	n int
}

// lockName returns a name of t's own.
func lockName(t *testing.T) string {
	seq.Lock()
	defer seq.Unlock()
	seq.n++
	return fmt.Sprintf("%s-%d-%d", t.Name(), time.Now().UnixNano(), seq.n)
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// members returns the nodes queued on name's lock.
func members(t *testing.T, c *Client, family, name string) []string {
	t.Helper()
	ch, _, err := c.conn.Children(c.dir(family, name))
	if err != nil && !strings.Contains(err.Error(), "node does not exist") {
		t.Fatal(err)
	}
	return ch
}

// waitMembers waits until name's lock has n nodes.
func waitMembers(t *testing.T, c *Client, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(members(t, c, "lock", name)) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes, want %d", len(members(t, c, "lock", name)), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMutualExclusion(t *testing.T) {
	n := lockName(t)
	ctx := testCtx(t, 60*time.Second)
	var w witness.Witness
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	var tokMu sync.Mutex
	var tokens []int64
	for range 4 {
		c := dial(t, 4*time.Second)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					l, err := c.Mutex(n).Acquire(ctx)
					if err != nil {
						errs <- err
						return
					}
					w.Enter(n)
					tokMu.Lock()
					tokens = append(tokens, l.Token())
					tokMu.Unlock()
					time.Sleep(time.Millisecond)
					w.Exit(n)
					if err := l.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if o := w.Overlaps(); o != 0 || w.Entries() != 160 {
		t.Fatalf("%d overlaps in %d entries (want 0 in 160)", o, w.Entries())
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("token %d after %d", tokens[i], tokens[i-1])
		}
	}
	if left := members(t, dial(t, 4*time.Second), "lock", n); len(left) != 0 {
		t.Fatalf("nodes left behind: %v", left)
	}
}

// TestFIFO: waiters are granted in the order they queued.
func TestFIFO(t *testing.T) {
	n := lockName(t)
	ctx := testCtx(t, 60*time.Second)
	admin := dial(t, 4*time.Second)
	holder, err := admin.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 6
	order := make(chan int, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		c := dial(t, 4*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Mutex(n).Acquire(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			l.Unlock(ctx)
		}()
		waitMembers(t, admin, n, i+2) // queued before the next one starts
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		if got != want {
			t.Fatalf("waiter %d granted in place %d", got, want)
		}
		want++
	}
	if want != waiters {
		t.Fatalf("%d grants, want %d", want, waiters)
	}
}

// TestCancelRemovesNode: a waiter whose ctx ends deletes its node before
// Acquire returns.
func TestCancelRemovesNode(t *testing.T) {
	n := lockName(t)
	ctx := testCtx(t, 30*time.Second)
	a, b := dial(t, 4*time.Second), dial(t, 4*time.Second)
	held, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.Mutex(n).Acquire(wctx)
		done <- err
	}()
	waitMembers(t, a, n, 2)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	if got := members(t, a, "lock", n); len(got) != 1 {
		t.Fatalf("after the cancel: %v, want the holder's node alone", got)
	}
	// Wait(0) and an expired Wait leave nothing behind either.
	if _, err := b.Mutex(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Wait(0): %v", err)
	}
	if _, err := b.Mutex(n).Acquire(ctx, dlock.Wait(100*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Wait(100ms): %v", err)
	}
	if got := members(t, a, "lock", n); len(got) != 1 {
		t.Fatalf("after giving up: %v", got)
	}
}

// TestDeadClient: a holder process killed with SIGKILL leaves nothing
// behind once its session expires; the waiter gets the lock.
func TestDeadClient(t *testing.T) {
	n := lockName(t)
	timeout := 2 * time.Second
	ch := startChild(t, server.Addr(), n, timeout)
	c := dial(t, timeout)
	got := make(chan *dlock.Lease, 1)
	ctx := testCtx(t, 60*time.Second)
	go func() {
		l, err := c.Mutex(n).Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitMembers(t, c, n, 2)
	killed := time.Now()
	if err := ch.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		return
	}
	defer l.Unlock(ctx)
	waited := time.Since(killed)
	t.Logf("granted %v after the kill (session timeout %v)", waited, timeout)
	if waited > 4*timeout+5*time.Second {
		t.Fatalf("granted only %v after the holder died", waited)
	}
	if l.Token() <= ch.token {
		t.Fatalf("token %d after the dead holder's %d", l.Token(), ch.token)
	}
}

// TestPausedHolder: a holder process stopped (SIGSTOP) past its session
// timeout loses the lock to a waiter; resumed, the first check it makes
// finds its lease lost, and Verify agrees.
func TestPausedHolder(t *testing.T) {
	n := lockName(t)
	timeout := 2 * time.Second
	ch := startChild(t, server.Addr(), n, timeout)
	c := dial(t, timeout)
	ctx := testCtx(t, 60*time.Second)
	if err := ch.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	l, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		ch.cmd.Process.Signal(syscall.SIGCONT)
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	t.Logf("second holder granted %v after the pause", time.Since(stopped))
	if l.Token() <= ch.token {
		t.Fatalf("token %d after %d", l.Token(), ch.token)
	}
	if err := ch.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var gap time.Duration
	var first bool
	line := ch.line(t)
	if _, err := fmt.Sscanf(line, "lost %s %t", new(string), &first); err != nil {
		t.Fatalf("child: %q", line)
	}
	if d, err := time.ParseDuration(strings.Fields(line)[1]); err == nil {
		gap = d
	}
	if gap < timeout || !first {
		t.Fatalf("child %q: the loss must be found by the first check after a pause longer than %v", line, timeout)
	}
	if line := ch.line(t); line != "verify true" {
		t.Fatalf("child Verify after the pause: %q, want ErrLockLost", line)
	}
	if err := l.Verify(ctx); err != nil {
		t.Fatalf("the second holder: %v", err)
	}
}

// TestDisconnectedHolderToldFirst: a holder whose connection goes silent
// (a black hole) is told its lease is lost before the server expires its
// session and grants the lock to the next waiter.
func TestDisconnectedHolderToldFirst(t *testing.T) {
	n := lockName(t)
	timeout := 2 * time.Second
	p := newProxy(t, server.Addr())
	a := dialAddr(t, p.addr(), timeout)
	b := dial(t, timeout)
	ctx := testCtx(t, 60*time.Second)
	held, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.blackHole()
	cut := time.Now()
	l, err := b.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	defer l.Unlock(ctx)
	select {
	case <-held.Done():
	default:
		t.Fatalf("the cut-off holder still holds when the next is granted (%v after the cut)", granted.Sub(cut))
	}
	if !errors.Is(context.Cause(held.Context()), dlock.ErrLockLost) {
		t.Fatalf("cause: %v", context.Cause(held.Context()))
	}
	t.Logf("granted %v after the cut", granted.Sub(cut))
}

// TestLostReplyAdopted: the create's reply is lost with the connection; on
// reconnecting, Acquire finds the node it made by its attempt id and holds
// the lock with it, and no orphan blocks the next waiter.
func TestLostReplyAdopted(t *testing.T) {
	n := lockName(t)
	p := newProxy(t, server.Addr())
	a := dialAddr(t, p.addr(), 4*time.Second)
	admin := dial(t, 4*time.Second)
	ctx := testCtx(t, 30*time.Second)
	// Create the lock's directory first: the lost reply is the node's.
	if err := admin.makeDir(ctx, admin.dir("lock", n)); err != nil {
		t.Fatal(err)
	}
	dropped := p.loseReplyTo(opMulti)
	l, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-dropped:
	default:
		t.Fatal("the proxy lost no reply")
	}
	got := members(t, admin, "lock", n)
	if len(got) != 1 || got[0] != l.ID() {
		t.Fatalf("nodes %v, want the lease's %s alone", got, l.ID())
	}
	_, st, err := admin.conn.Get(admin.dir("lock", n) + "/" + l.ID())
	if err != nil || st.Czxid != l.Token() {
		t.Fatalf("node czxid %v (%v), token %d", st, err, l.Token())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := admin.Mutex(n).Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("the next waiter: %v", err)
	}
	next.Unlock(ctx)
}

// watches returns the server's watched paths and watches (wchs).
func watches(t *testing.T) (paths, total int) {
	t.Helper()
	out, err := zkproc.FourLetter(context.Background(), server.Addr(), "wchs")
	if err != nil {
		t.Fatal(err)
	}
	var conns int
	if _, err := fmt.Sscanf(out, "%d connections watching %d paths\nTotal watches:%d", &conns, &paths, &total); err != nil {
		t.Fatalf("wchs %q: %v", out, err)
	}
	return paths, total
}

// waitWatches waits until the server has paths more watched paths and
// want more watches than paths0 and before.
func waitWatches(t *testing.T, paths0, before, paths, want int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, w := watches(t)
		if p-paths0 == paths && w-before == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d more watches on %d more paths, want %d on %d", what, w-before, p-paths0, want, paths)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNoHerd: each waiter of a mutex watches one node, its predecessor,
// and a release wakes the next waiter alone. (The holder watches its own
// node, the first waiter's predecessor: see guard.go.)
func TestNoHerd(t *testing.T) {
	n := lockName(t)
	ctx := testCtx(t, 30*time.Second)
	admin := dial(t, 4*time.Second)
	paths0, before := watches(t)
	holder, err := admin.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 5
	var wg sync.WaitGroup
	got := make(chan *dlock.Lease, waiters)
	for i := range waiters {
		c := dial(t, 4*time.Second)
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Mutex(n).Acquire(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		waitMembers(t, admin, n, i+2)
	}
	// One watch per waiter, each on a path of its own, and the holder's.
	waitWatches(t, paths0, before, waiters, waiters+1, "waiters")
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	first := <-got
	// Two watches fired (the holder's and the first waiter's): the four
	// others still wait on theirs, and the new holder watches its node.
	waitWatches(t, paths0, before, waiters-1, waiters, "after one hand-off")
	first.Unlock(ctx)
	for range waiters - 1 {
		(<-got).Unlock(ctx)
	}
	wg.Wait()
}

// TestUncontendedRequests: an uncontended acquisition and its release are
// two requests to ZooKeeper (the create's transaction, which says the node
// is alone and gives its token, and the delete), and a hold that lives
// past guardAfter one more (its guard's watch). (Four-letter commands, wchs
// and mntr, are not counted as requests but for the mntr that reads the
// count first.)
func TestUncontendedRequests(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	c := dial(t, 10*time.Second)
	n := lockName(t)
	warm, err := c.Mutex(n).Acquire(ctx) // the directories exist
	if err != nil {
		t.Fatal(err)
	}
	warm.Unlock(ctx)
	const pairs = 50
	p0 := packets(t, server.Addr())
	for range pairs {
		l, err := c.Mutex(n).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// Other sessions of the shared server may ping it meanwhile: allow a
	// few requests that are not ours.
	if got := packets(t, server.Addr()) - p0 - 1; got < 2*pairs || got > 2*pairs+5 {
		t.Fatalf("%d requests for %d pairs, want 2 a pair", got, pairs)
	}
	paths0, w0 := watches(t)
	p0 = packets(t, server.Addr())
	l, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitWatches(t, paths0, w0, 1, 1, "the guard of a hold older than guardAfter")
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := packets(t, server.Addr()) - p0 - 1; got < 3 || got > 3+5 {
		t.Fatalf("%d requests for a hold older than guardAfter, want 3 (its create, its watch, its delete)", got)
	}
}
