// Package dlocktest is the conformance suite every dlock backend passes: the
// same behaviour, checked the same way, on Redis, etcd and ZooKeeper (and
// on a backend of your own). A backend's test calls Run with a Backend
// that makes clients on a real server:
//
//	func TestConformance(t *testing.T) {
//		dlocktest.Run(t, dlocktest.Backend{NewClient: ..., Renewal: 2 * time.Second})
//	}
//
// The suite checks mutual exclusion with an overlap witness, fencing tokens
// that increase with every grant, waiting, cancellation, reentrancy, the
// lost-lock signal (lease expiry, a lock removed behind its holder's back
// and found by Verify, a holder's key deleted from outside and signalled
// unasked, a closed client), MaxHold (the cap ends a renewed lease and
// frees the lock in the store), read-write and semaphore limits, the
// permit count kept in the store (set by the first, a mismatch refused,
// SetPermits), MultiLock (all names or none, no deadlock between
// overlapping ones), QueueTimeout (a live waiter keeps its place, a silent
// one stops blocking the queue), Inspect (one meaning of dlock.Info on
// every backend), List (held locks by a glob, oldest first), leader election (package election on the backend's
// Mutex and Inspect: one leader at a time, increasing tokens, a closed
// leader followed by another, a panicking leader that gives the lock up,
// as under Do), Close (it ends waiting Acquire calls with ErrClosed,
// returns within seam.CloseTimeout with the client cut off from its store,
// and leaves no goroutine of the backend running), bad input, and the text
// of the common errors (one format on every backend; CheckError).
//
// The files are the concepts: dlocktest.go the Backend, the Client and the
// basic lock behaviour; errors.go the errors' text; maxhold.go, semaphore.go, multilock.go,
// queuetimeout.go, inspect.go, election.go and close.go the rest.
package dlocktest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
)

// Backend is what the suite needs of a backend under test.
type Backend struct {
	// NewClient returns a new client of the backend, as another process
	// would have its own, connected to the server under test; it closes
	// the client at t's cleanup. Leases kept by renewals (no LeaseTime)
	// must be granted for at most Renewal.
	NewClient func(t testing.TB) Client
	// Renewal is how long a renewed grant lasts without a renewal: the
	// suite holds a lock for longer to see it renewed.
	Renewal time.Duration
	// Lease is a fixed lease (LeaseTime) the backend honours precisely
	// enough for the suite to wait it out; 0: the backend has no fixed
	// leases and those tests are skipped.
	Lease time.Duration
	// Steal removes every trace of name's lock in the store behind its
	// holders' backs (an operator's force unlock); nil skips those tests.
	Steal func(t testing.TB, name string)
	// Tamper deletes the key or node of name's current holder from
	// outside, as an operator would (redis-cli DEL, etcdctl del, zkCli
	// delete), leaving its waiters queued; nil skips the Deleted tests.
	Tamper func(ctx context.Context, name string) error
	// Told bounds how long after a Tamper the holder may go on believing
	// it holds the lock: its Done must close by then (plus toldSlack for
	// a loaded machine's timers). It is the backend's own bound: on Redis
	// the watchdog's renewal interval, on etcd the session TTL (a
	// keepalive checks the holders' keys), on ZooKeeper (every held node is
	// watched) a second. 0: Renewal.
	Told time.Duration
	// LockDelay says the backend holds a lock back from everyone after its
	// holder lost it without a release until that holder has been told
	// (dlock.LockDelay: etcd): the Deleted tests then check that the
	// waiter is granted the deleted lock only once the holder's Err says
	// it lost it. Otherwise they bound the overlap by Told.
	LockDelay bool
	// MultiLockUnsupported says the backend documents that it has no
	// MultiLock: its Client.MultiLock's Acquire must then fail with an
	// error wrapping errors.ErrUnsupported (and take nothing), which is
	// all the MultiLock tests check. Otherwise a backend whose
	// Client.MultiLock is set passes them in full.
	MultiLockUnsupported bool
	// QueueTimeout is the shortest dlock.QueueTimeout the backend honours
	// (the QueueTimeout tests use it); 0 skips them.
	QueueTimeout time.Duration
	// NewCutClient returns a client like NewClient and a function that cuts
	// it off from the server for good (its requests and replies stop
	// passing, its connections stay open: a partition, or a paused
	// process, as the server sees it). The client's own leases and session
	// must outlive QueueTimeout by several seconds, so that the test can
	// tell a queue timeout from an expired session. nil skips the tests of
	// a silent waiter and of Close with the store cut off.
	NewCutClient func(t testing.TB) (Client, func())
	// NewObservedClient is NewClient with an Observer that receives the
	// new client's lock events (its Config.Observer); nil skips the
	// checks of events (the LostMaxHold of the MaxHold tests).
	NewObservedClient func(t testing.TB, o observe.Observer) Client
}

// toldSlack is what the Deleted tests allow on top of Backend.Told for
// timers and goroutines that run late on a loaded machine (-race, two
// cores shared with other tests).
const toldSlack = 300 * time.Millisecond

// Client is one client of a backend: its lockers by shape. A nil field is a
// shape the backend does not have (its tests are skipped).
type Client struct {
	Mutex func(name string) dlock.Locker // not reentrant
	Lock  func(name string) dlock.Locker // reentrant
	Read  func(name string) dlock.Locker // the read side of a read-write lock
	Write func(name string) dlock.Locker // its write side
	// Semaphore returns the semaphore called name with a count of
	// permits, which the store keeps (see Semaphore).
	Semaphore func(name string, permits int) Semaphore
	// MultiLock locks every one of names or none; its members exclude the
	// Lock of the same name (see Backend.MultiLockUnsupported).
	MultiLock func(names ...string) dlock.Locker
	// Inspect is the client's Inspect (the Inspect and election
	// tests need it; nil skips them).
	Inspect func(ctx context.Context, name string) (dlock.Info, error)
	// List is the client's List (the List test needs it; nil skips it).
	List  func(ctx context.Context, pattern string) ([]dlock.Info, error)
	Close func() error
}

// Semaphore is a backend's semaphore: a Locker of one permit at a time,
// whose permit count the store keeps for every user of the name. The
// first acquisition sets it; an acquisition whose Semaphore has another
// count fails with an error wrapping dlock.ErrInvalidArgument and takes
// nothing (a waiter whose count the store no longer keeps fails so too);
// SetPermits changes it for every user and makes this Semaphore count
// against it (permits held beyond a lowered count stay held until
// released).
type Semaphore interface {
	dlock.Locker
	SetPermits(ctx context.Context, n int) error
}

// Run runs the whole suite, each part a subtest.
func Run(t *testing.T, b Backend) {
	s := &suite{b: b}
	t.Run("BadInput", s.badInput)
	t.Run("ErrorTexts", s.errorTexts)
	for _, sh := range s.exclusive() {
		t.Run("MutualExclusion/"+sh.name, func(t *testing.T) { s.mutualExclusion(t, sh) })
		t.Run("TryAndWait/"+sh.name, func(t *testing.T) { s.tryAndWait(t, sh) })
		t.Run("HandOff/"+sh.name, func(t *testing.T) { s.handOff(t, sh) })
		t.Run("CancelWhileWaiting/"+sh.name, func(t *testing.T) { s.cancelWhileWaiting(t, sh) })
		t.Run("UnlockTwice/"+sh.name, func(t *testing.T) { s.unlockTwice(t, sh) })
		t.Run("Renewal/"+sh.name, func(t *testing.T) { s.renewal(t, sh) })
		t.Run("LeaseExpires/"+sh.name, func(t *testing.T) { s.leaseExpires(t, sh) })
		t.Run("Stolen/"+sh.name, func(t *testing.T) { s.stolen(t, sh) })
		t.Run("Deleted/"+sh.name, func(t *testing.T) { s.deleted(t, sh) })
		t.Run("Close/"+sh.name, func(t *testing.T) { s.close(t, sh) })
		t.Run("CloseEndsWaiter/"+sh.name, func(t *testing.T) { s.closeEndsWaiter(t, sh) })
	}
	t.Run("CloseBounded", s.closeBounded)
	t.Run("NoGoroutineAfterClose", s.noGoroutineAfterClose)
	for _, sh := range s.exclusive()[:2] {
		t.Run("MaxHold/"+sh.name, func(t *testing.T) { s.maxHold(t, sh) })
	}
	t.Run("Reentrant", s.reentrant)
	t.Run("MutexNotReentrant", s.mutexNotReentrant)
	t.Run("ReadWrite", s.readWrite)
	t.Run("ReadWrite/DowngradePastQueuedWriter", s.downgrade)
	t.Run("ReadWrite/ReaderPastQueuedWriter", s.readerPastWriter)
	t.Run("Reentrant/PastQueuedWaiter", s.reentrantPastWaiter)
	t.Run("Reentrant/LeaseAndMaxHold", s.reentrantOptions)
	t.Run("Semaphore", s.semaphore)
	t.Run("Semaphore/PermitsInTheStore", s.permitsInTheStore)
	t.Run("Semaphore/SetPermits", s.setPermits)
	t.Run("Do", s.do)
	t.Run("Inspect/Exclusive", s.inspectExclusive)
	t.Run("Inspect/ReadWrite", s.inspectReadWrite)
	t.Run("Inspect/Semaphore", s.inspectSemaphore)
	t.Run("List", s.list)
	t.Run("Election/OneLeaderAtATime", s.electionTerms)
	t.Run("Election/Failover", s.electionFailover)
	t.Run("PanicReleases", s.panicReleases)
	t.Run("MultiLock/AllOrNone", s.multiAllOrNone)
	t.Run("MultiLock/MutualExclusion", s.multiMutualExclusion)
	t.Run("MultiLock/BadInput", s.multiBadInput)
	for _, sh := range s.exclusive()[:2] {
		t.Run("QueueTimeout/LiveWaiterKeepsPlace/"+sh.name, func(t *testing.T) { s.liveWaiter(t, sh) })
	}
	t.Run("QueueTimeout/LiveWriterHoldsReadersBack", s.liveWriter)
	for _, sh := range s.exclusive() {
		t.Run("QueueTimeout/SilentWaiter/"+sh.name, func(t *testing.T) { s.silentWaiter(t, sh) })
	}
}

type suite struct{ b Backend }

// shape is one exclusive lock shape of a client.
type shape struct {
	name string
	get  func(c Client) func(string) dlock.Locker
}

func (s *suite) exclusive() []shape {
	return []shape{
		{"mutex", func(c Client) func(string) dlock.Locker { return c.Mutex }},
		{"lock", func(c Client) func(string) dlock.Locker { return c.Lock }},
		{"write", func(c Client) func(string) dlock.Locker { return c.Write }},
	}
}

// lockers returns n clients' lockers of shape sh, skipping t if the backend
// lacks the shape.
func (s *suite) lockers(t *testing.T, sh shape, n int) []func(string) dlock.Locker {
	t.Helper()
	out := make([]func(string) dlock.Locker, n)
	for i := range out {
		f := sh.get(s.b.NewClient(t))
		if f == nil {
			t.Skipf("the backend has no %s", sh.name)
		}
		out[i] = f
	}
	return out
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

var nameSeq struct {
	sync.Mutex
	n int
}

// name returns a lock name of its own for t (tests may share a server).
func name(t *testing.T) string {
	nameSeq.Lock()
	defer nameSeq.Unlock()
	nameSeq.n++
	r := strings.NewReplacer("/", ".", " ", "_")
	return "dlocktest." + r.Replace(t.Name()) + "." + time.Now().Format("150405.000000") + "." + string(rune('a'+nameSeq.n%26))
}

func acquire(t *testing.T, ctx context.Context, l dlock.Locker, opts ...dlock.Option) *dlock.Lease {
	t.Helper()
	lease, err := l.Acquire(ctx, opts...)
	if err != nil {
		t.Fatalf("acquire %s: %v", l.Name(), err)
	}
	return lease
}

func unlock(t *testing.T, l *dlock.Lease) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("unlock %s: %v", l.Name(), err)
	}
}

func (s *suite) badInput(t *testing.T) {
	c := s.b.NewClient(t)
	ctx := testCtx(t, 10*time.Second)
	for _, n := range []string{"", strings.Repeat("x", seam.MaxNameLen+1)} {
		if _, err := c.Mutex(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrInvalidName) {
			t.Errorf("name of %d bytes: %v, want ErrInvalidName", len(n), err)
		}
	}
	n := name(t)
	for _, o := range []dlock.Option{dlock.LeaseTime(0), dlock.LeaseTime(-time.Second), dlock.Wait(-time.Second)} {
		if _, err := c.Mutex(n).Acquire(ctx, o); !errors.Is(err, dlock.ErrInvalidDuration) {
			t.Errorf("bad duration: %v, want ErrInvalidDuration", err)
		}
	}
	// Nothing was taken: another client gets the lock at once.
	l := acquire(t, ctx, s.b.NewClient(t).Mutex(n), dlock.Wait(0))
	unlock(t, l)
	var nilLease *dlock.Lease
	if err := nilLease.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("nil lease Unlock: %v, want ErrNotHeld", err)
	}
	if err := dlock.Do(ctx, nil, nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Do(nil): %v, want ErrInvalidArgument", err)
	}
}

// mutualExclusion runs 3 clients × 3 goroutines on one name: no two holders
// overlap, and every grant's token is greater than the one before it.
func (s *suite) mutualExclusion(t *testing.T, sh shape) {
	ls := s.lockers(t, sh, 3)
	n := name(t)
	ctx := testCtx(t, 60*time.Second)
	var w witness.Witness
	var mu sync.Mutex
	var tokens []int64
	hammer(t, ctx, 9, 8, func(i int) dlock.Locker { return ls[i%3](n) }, func(_ int, l *dlock.Lease) {
		w.Enter(n)
		mu.Lock()
		tokens = append(tokens, l.Token())
		mu.Unlock()
		time.Sleep(time.Millisecond)
		w.Exit(n)
	})
	if o := w.Overlaps(); o != 0 {
		t.Fatalf("%d overlaps in %d entries", o, w.Entries())
	}
	if w.Entries() != 72 {
		t.Fatalf("%d entries, want 72", w.Entries())
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("grant %d has token %d after %d: tokens must increase", i, tokens[i], tokens[i-1])
		}
	}
}

func (s *suite) tryAndWait(t *testing.T, sh shape) {
	ls := s.lockers(t, sh, 2)
	n := name(t)
	ctx := testCtx(t, 30*time.Second)
	held := acquire(t, ctx, ls[0](n))
	defer unlock(t, held)

	if _, err := ls[1](n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Wait(0) on a held lock: %v, want ErrNotAcquired", err)
	}
	start := time.Now()
	if _, err := ls[1](n).Acquire(ctx, dlock.Wait(300*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("Wait(300ms) on a held lock: %v, want ErrNotAcquired", err)
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("Wait(300ms) gave up after %v", d)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := ls[1](n).Acquire(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ctx deadline while waiting: %v, want context.DeadlineExceeded", err)
	}
	if err := held.Err(); err != nil {
		t.Fatalf("holder lost its lock to failed attempts: %v", err)
	}
}

func (s *suite) handOff(t *testing.T, sh shape) {
	ls := s.lockers(t, sh, 2)
	n := name(t)
	ctx := testCtx(t, 30*time.Second)
	first := acquire(t, ctx, ls[0](n))
	got := acquireLater(t, ctx, ls[1](n), dlock.Wait(20*time.Second))
	select {
	case l := <-got:
		t.Fatalf("second holder got the lock while the first held it (%v)", l)
	case <-time.After(200 * time.Millisecond):
	}
	released := time.Now()
	unlock(t, first)
	second := <-got
	if second == nil {
		return
	}
	defer unlock(t, second)
	if d := time.Since(released); d > 5*time.Second {
		t.Errorf("hand-off took %v", d)
	}
	if second.Token() <= first.Token() {
		t.Errorf("second token %d not above first %d", second.Token(), first.Token())
	}
}

// cancelWhileWaiting: a waiter that gives up leaves no trace that delays the
// next one.
func (s *suite) cancelWhileWaiting(t *testing.T, sh shape) {
	ls := s.lockers(t, sh, 3)
	n := name(t)
	ctx := testCtx(t, 30*time.Second)
	held := acquire(t, ctx, ls[0](n))
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := ls[1](n).Acquire(wctx)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want context.Canceled", err)
	}
	unlock(t, held)
	start := time.Now()
	l := acquire(t, ctx, ls[2](n), dlock.Wait(10*time.Second))
	defer unlock(t, l)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the next client waited %v after a cancelled waiter", d)
	}
}

func (s *suite) unlockTwice(t *testing.T, sh shape) {
	ls := s.lockers(t, sh, 1)
	ctx := testCtx(t, 10*time.Second)
	l := acquire(t, ctx, ls[0](name(t)))
	unlock(t, l)
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld", err)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("Err after a clean Unlock: %v, want nil", err)
	}
	if err := l.Verify(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Verify after Unlock: %v, want ErrNotHeld", err)
	}
}

// renewal: a lock held without a fixed lease outlives its TTL.
func (s *suite) renewal(t *testing.T, sh shape) {
	ls := s.lockers(t, sh, 2)
	n := name(t)
	ctx := testCtx(t, s.b.Renewal*4+30*time.Second)
	l := acquire(t, ctx, ls[0](n))
	select {
	case <-l.Done():
		t.Fatalf("lost while renewed: %v", l.Err())
	case <-time.After(s.b.Renewal * 5 / 2):
	}
	if err := l.Verify(ctx); err != nil {
		t.Fatalf("Verify after %v: %v", s.b.Renewal*5/2, err)
	}
	if _, err := ls[1](n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another client got a renewed lock: %v", err)
	}
	unlock(t, l)
}

// leaseExpires: a fixed lease ends on its own; the holder is told before
// anyone else is granted the lock: when the second Acquire returns, the
// first holder's Err (which reads its own clock) already says it lost the
// lock, and its Done closes (a timer: it may run late on a loaded machine,
// so it is given a second).
func (s *suite) leaseExpires(t *testing.T, sh shape) {
	if s.b.Lease == 0 {
		t.Skip("the backend has no fixed leases")
	}
	ls := s.lockers(t, sh, 2)
	n := name(t)
	ctx := testCtx(t, s.b.Lease*4+30*time.Second)
	a := acquire(t, ctx, ls[0](n), dlock.LeaseTime(s.b.Lease))
	b := acquire(t, ctx, ls[1](n), dlock.Wait(s.b.Lease*3+10*time.Second))
	heldErr := a.Err()
	defer unlock(t, b)
	if !errors.Is(heldErr, dlock.ErrLockLost) {
		t.Fatalf("the second holder was granted the lock while the first still held it (its Err: %v)", heldErr)
	}
	select {
	case <-a.Done():
	case <-time.After(time.Second):
		t.Fatal("the first holder's Done never closed after its lease ran out")
	}
	if err := a.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err: %v, want ErrLockLost", err)
	}
	if err := context.Cause(a.Context()); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("context cause: %v, want ErrLockLost", err)
	}
	if err := a.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock of an expired lease: %v, want ErrLockLost", err)
	}
	if b.Token() <= a.Token() {
		t.Fatalf("token %d after %d", b.Token(), a.Token())
	}
}

// stolen: a lock removed behind its holder's back is reported lost by
// Verify, and Unlock says so.
func (s *suite) stolen(t *testing.T, sh shape) {
	if s.b.Steal == nil {
		t.Skip("the backend cannot remove a lock behind its holder's back")
	}
	ls := s.lockers(t, sh, 1)
	n := name(t)
	ctx := testCtx(t, 20*time.Second)
	l := acquire(t, ctx, ls[0](n))
	s.b.Steal(t, n)
	if err := l.Verify(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Verify of a stolen lock: %v, want ErrLockLost", err)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("Done not closed after Verify found the lock gone")
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock of a stolen lock: %v, want ErrLockLost", err)
	}
}

// deleted: a holder whose lock is deleted from outside (Backend.Tamper) is
// told without asking: its Done closes within Backend.Told, Err and the
// Context's cause wrap ErrLockLost, Unlock says so, and the waiter queued
// behind it gets the lock with a greater token and keeps it. On a backend
// with a lock-delay (Backend.LockDelay) the waiter is granted the lock only
// once the holder was told; on the others a deletion from outside hands
// the lock on at once, before the holder can be told, and the suite bounds
// the overlap rather than forbidding it.
func (s *suite) deleted(t *testing.T, sh shape) {
	if s.b.Tamper == nil {
		t.Skip("the backend cannot delete a holder's lock from outside")
	}
	bound := s.b.Told
	if bound == 0 {
		bound = s.b.Renewal
	}
	ls := s.lockers(t, sh, 2)
	n := name(t)
	ctx := testCtx(t, s.b.Renewal*4+60*time.Second)
	a := acquire(t, ctx, ls[0](n))
	type result struct {
		l      *dlock.Lease
		err    error
		heldOK error // the deleted holder's Err when the waiter was granted
	}
	got := make(chan result, 1)
	go func() {
		l, err := ls[1](n).Acquire(ctx)
		got <- result{l, err, a.Err()}
	}()
	select {
	case r := <-got:
		t.Fatalf("the waiter got a held lock (%v)", r.err)
	case <-time.After(200 * time.Millisecond): // queued behind a
	}
	tampered := time.Now()
	if err := s.b.Tamper(ctx, n); err != nil {
		t.Fatalf("Tamper: %v", err)
	}
	select {
	case <-a.Done():
	case <-time.After(bound + toldSlack - time.Since(tampered)):
		t.Fatalf("the holder was not told within %v (+%v) that its lock was deleted: Err %v", bound, toldSlack, a.Err())
	}
	told := time.Since(tampered)
	if err := a.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err: %v, want ErrLockLost", err)
	}
	if err := context.Cause(a.Context()); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("context cause: %v, want ErrLockLost", err)
	}
	var b *dlock.Lease
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("the waiter after the delete: %v", r.err)
		}
		if s.b.LockDelay && !errors.Is(r.heldOK, dlock.ErrLockLost) {
			t.Fatalf("the waiter was granted the deleted lock while its holder still held it (Err %v): the lock-delay let it in", r.heldOK)
		}
		b = r.l
	case <-time.After(s.b.Renewal + 10*time.Second):
		t.Fatal("the waiter did not get the deleted lock")
	}
	if b.Token() <= a.Token() {
		t.Fatalf("the waiter's token %d is not above the deleted holder's %d", b.Token(), a.Token())
	}
	if err := a.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock of a deleted lock: %v, want ErrLockLost", err)
	}
	// The old holder's loss (and its Unlock) took nothing from the new one.
	if err := b.Verify(ctx); err != nil {
		t.Fatalf("the new holder after the old one's loss: %v", err)
	}
	unlock(t, b)
	t.Logf("told %v after the delete (bound %v)", told, bound)
}

// close: closing a client loses its leases and refuses new acquisitions;
// its locks are free for others.
func (s *suite) close(t *testing.T, sh shape) {
	c := s.b.NewClient(t)
	get := sh.get(c)
	if get == nil {
		t.Skipf("the backend has no %s", sh.name)
	}
	n := name(t)
	ctx := testCtx(t, 20*time.Second)
	l := acquire(t, ctx, get(n))
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-l.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a lease of a closed client is not lost")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err after Close: %v, want ErrLockLost", err)
	}
	if _, err := get(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Acquire on a closed client: %v, want ErrClosed", err)
	}
	other := acquire(t, ctx, sh.get(s.b.NewClient(t))(n), dlock.Wait(10*time.Second))
	unlock(t, other)
}

func (s *suite) reentrant(t *testing.T) {
	ls := s.lockers(t, s.exclusive()[1], 2)
	n := name(t)
	ctx := testCtx(t, 20*time.Second)
	outer := acquire(t, ctx, ls[0](n))
	inner := acquire(t, outer.Context(), ls[0](n), dlock.Wait(0))
	if inner.Token() != outer.Token() {
		t.Fatalf("re-entry token %d, outer %d", inner.Token(), outer.Token())
	}
	if _, err := ls[1](n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another owner got a held Lock: %v", err)
	}
	unlock(t, inner)
	if _, err := ls[1](n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("the Lock was free after one of two unlocks: %v", err)
	}
	if err := outer.Verify(ctx); err != nil {
		t.Fatalf("outer after the inner unlock: %v", err)
	}
	unlock(t, outer)
	l := acquire(t, ctx, ls[1](n), dlock.Wait(5*time.Second))
	unlock(t, l)
}

// reentrantOptions: a re-entry's options apply to the hold it joins, as a
// store that counts re-entries applies them (Redis): a longer LeaseTime
// extends the hold past the first acquisition's lease, and a MaxHold caps
// it (the hold is lost at it, and released in the store).
func (s *suite) reentrantOptions(t *testing.T) {
	d := s.b.Lease
	if d == 0 {
		t.Skip("the backend has no fixed leases")
	}
	ls := s.lockers(t, s.exclusive()[1], 2)
	n := name(t)
	ctx := testCtx(t, 10*d+60*time.Second)
	outer := acquire(t, ctx, ls[0](n), dlock.LeaseTime(2*d))
	inner := acquire(t, outer.Context(), ls[0](n), dlock.LeaseTime(5*d), dlock.Wait(0))
	time.Sleep(3 * d) // past the first lease, within the re-entry's
	if err := outer.Verify(ctx); err != nil {
		t.Fatalf("the hold %v after a re-entry with LeaseTime(%v), past its first LeaseTime(%v): %v; want it held", 3*d, 5*d, 2*d, err)
	}
	if _, err := ls[1](n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another owner past the first lease, within the re-entry's: %v; want ErrNotAcquired", err)
	}
	unlock(t, inner)
	unlock(t, outer)

	m := n + ".maxhold"
	held := acquire(t, ctx, ls[0](m))
	start := time.Now()
	capped := acquire(t, held.Context(), ls[0](m), dlock.MaxHold(d), dlock.Wait(0))
	select {
	case <-held.Done():
		if took := time.Since(start); took < d*9/10 {
			t.Fatalf("a hold re-entered with MaxHold(%v) lost after %v", d, took)
		}
		if err := held.Err(); !errors.Is(err, dlock.ErrLockLost) || !strings.Contains(err.Error(), "max_hold") {
			t.Fatalf("the hold at its re-entry's MaxHold: %v; want ErrLockLost (max_hold)", err)
		}
	case <-time.After(d + 10*time.Second):
		t.Fatalf("a hold re-entered with MaxHold(%v) still held after %v", d, time.Since(start))
	}
	_ = capped.Unlock(ctx)
	_ = held.Unlock(ctx)
	l := acquire(t, ctx, ls[1](m), dlock.Wait(10*time.Second)) // released in the store, not left to expire
	unlock(t, l)
}

func (s *suite) mutexNotReentrant(t *testing.T) {
	ls := s.lockers(t, s.exclusive()[0], 1)
	n := name(t)
	ctx := testCtx(t, 10*time.Second)
	l := acquire(t, ctx, ls[0](n))
	defer unlock(t, l)
	if _, err := ls[0](n).Acquire(l.Context(), dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a Mutex re-entered: %v, want ErrNotAcquired", err)
	}
}

// rwClients returns k new clients of the backend, or skips t if it has no
// read-write lock.
func (s *suite) rwClients(t *testing.T, k int) []Client {
	cs := make([]Client, k)
	for i := range cs {
		cs[i] = s.b.NewClient(t)
	}
	if cs[0].Read == nil || cs[0].Write == nil {
		t.Skip("the backend has no read-write lock")
	}
	return cs
}

func (s *suite) readWrite(t *testing.T) {
	cs := s.rwClients(t, 2)
	a, b := cs[0], cs[1]
	n := name(t)
	ctx := testCtx(t, 20*time.Second)
	r1 := acquire(t, ctx, a.Read(n), dlock.Wait(0))
	r2 := acquire(t, ctx, b.Read(n), dlock.Wait(0))
	if _, err := b.Write(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a writer got in beside readers: %v", err)
	}
	unlock(t, r1)
	unlock(t, r2)
	w := acquire(t, ctx, b.Write(n), dlock.Wait(5*time.Second))
	if _, err := a.Read(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a reader got in beside a writer: %v", err)
	}
	unlock(t, w)
	r := acquire(t, ctx, a.Read(n), dlock.Wait(5*time.Second))
	unlock(t, r)

	// Readers and writers at once: writers alone, readers together.
	var wit witness.Witness
	write := func(i int) bool { return i%4 == 0 }
	hammer(t, ctx, 8, 5, func(i int) dlock.Locker {
		c := []Client{a, b}[i%2]
		if write(i) {
			return c.Write(n)
		}
		return c.Read(n)
	}, func(i int, _ *dlock.Lease) {
		if write(i) {
			wit.Enter(n)
			time.Sleep(time.Millisecond)
			wit.Exit(n)
			return
		}
		wit.EnterShared(n)
		time.Sleep(time.Millisecond)
		wit.ExitShared(n)
	})
	if o := wit.Overlaps(); o != 0 {
		t.Fatalf("%d overlaps of a writer with another holder", o)
	}
}

// downgrade: the writer takes the read side under its own write hold at
// once, also with another writer queued behind it (a reader that queued
// would wait for that writer, and the writer for the holder: for ever);
// once the write side is released, the owner's way back to it is refused
// (ErrUpgrade) and a new reader waits behind the queued writer, which gets
// in only once both sides are released.
func (s *suite) downgrade(t *testing.T) {
	cs := s.rwClients(t, 3)
	a, b, c := cs[0], cs[1], cs[2]
	n := name(t)
	ctx := testCtx(t, 60*time.Second)
	w := acquire(t, ctx, a.Write(n))
	got := acquireLater(t, ctx, b.Write(n), dlock.Wait(40*time.Second))
	queued(t, ctx, a, n, "a writer queued behind the writer")
	r, err := a.Read(n).Acquire(w.Context(), dlock.Wait(5*time.Second))
	if err != nil {
		t.Fatalf("the writer's own read side, another writer queued: %v; want it granted at once (a downgrade)", err)
	}
	if a.Inspect != nil {
		inspectUntil(t, ctx, a.Inspect, n, "the writer and its read side hold, a writer waits", func(i dlock.Info) bool { return len(i.Holders) == 2 && len(i.Queue) == 1 })
	}
	unlock(t, w)
	if a.Inspect != nil {
		inspectUntil(t, ctx, a.Inspect, n, "the read side holds, a writer waits", func(i dlock.Info) bool {
			return len(i.Holders) == 1 && i.Holders[0].Mode == "read" && len(i.Queue) == 1
		})
	}
	if err := r.Context().Err(); err != nil {
		t.Fatalf("the downgraded reader's Context after the write's unlock: %v; want it live (the read goes on)", err)
	}
	if _, err := a.Write(n).Acquire(r.Context(), dlock.Wait(0)); !errors.Is(err, dlock.ErrUpgrade) {
		t.Fatalf("the downgraded reader's write side again: %v; want ErrUpgrade", err)
	}
	if _, err := c.Read(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a new reader beside the downgraded one, a writer queued: %v; want ErrNotAcquired (the writer goes first)", err)
	}
	select {
	case l := <-got:
		t.Fatalf("the queued writer got in beside the downgraded reader (lease %v)", l != nil)
	case <-time.After(300 * time.Millisecond):
	}
	unlock(t, r)
	if l := <-got; l != nil {
		unlock(t, l)
	}
}

// readerPastWriter: with a writer queued, a reader that holds the read
// side re-enters it at once (it holds already: waiting would deadlock
// against the writer, which waits for it), a new reader waits behind the
// writer (writers do not starve), and the holder's upgrade is refused at
// once with ErrUpgrade, not after its Wait.
func (s *suite) readerPastWriter(t *testing.T) {
	cs := s.rwClients(t, 3)
	a, b, c := cs[0], cs[1], cs[2]
	n := name(t)
	ctx := testCtx(t, 60*time.Second)
	r := acquire(t, ctx, a.Read(n))
	stop := waitIn(t, ctx, b.Write(n))
	queued(t, ctx, a, n, "a writer queued behind the reader")
	again, err := a.Read(n).Acquire(r.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("the reader's re-entry, a writer queued: %v; want it at once", err)
	}
	if _, err := c.Read(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a new reader with a writer queued: %v; want ErrNotAcquired (the writer goes first)", err)
	}
	start := time.Now()
	if _, err := a.Write(n).Acquire(r.Context(), dlock.Wait(10*time.Second)); !errors.Is(err, dlock.ErrUpgrade) {
		t.Fatalf("the reader's upgrade: %v; want ErrUpgrade", err)
	} else if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the upgrade was refused after %v; want at once, not at the end of its Wait", d)
	}
	unlock(t, again)
	unlock(t, r)
	stop()
}

// reentrantPastWaiter: a reentrant lock's holder re-enters it at once
// while another owner waits for it, and the waiter gets it only after the
// last of the holder's unlocks.
func (s *suite) reentrantPastWaiter(t *testing.T) {
	ls := s.lockers(t, s.exclusive()[1], 2)
	n := name(t)
	ctx := testCtx(t, 60*time.Second)
	outer := acquire(t, ctx, ls[0](n))
	got := acquireLater(t, ctx, ls[1](n), dlock.Wait(40*time.Second))
	time.Sleep(300 * time.Millisecond) // the waiter queues
	inner, err := ls[0](n).Acquire(outer.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("the holder's re-entry, another owner waiting: %v; want it at once", err)
	}
	unlock(t, inner)
	select {
	case <-got:
		t.Fatal("the waiter got the lock after one of the holder's two unlocks")
	case <-time.After(300 * time.Millisecond):
	}
	unlock(t, outer)
	if l := <-got; l != nil {
		unlock(t, l)
	}
}

func (s *suite) do(t *testing.T) {
	a, b := s.b.NewClient(t), s.b.NewClient(t)
	n := name(t)
	ctx := testCtx(t, 20*time.Second)
	boom := errors.New("boom")
	ran := false
	err := dlock.Do(ctx, a.Mutex(n), func(ctx context.Context, l *dlock.Lease) error {
		ran = true
		if _, err := b.Mutex(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("another client got the lock inside Do: %v", err)
		}
		return boom
	})
	if !ran || !errors.Is(err, boom) {
		t.Fatalf("Do: ran %v, err %v; want the section's error", ran, err)
	}
	l := acquire(t, ctx, b.Mutex(n), dlock.Wait(5*time.Second))
	unlock(t, l)
}

// queued returns once one waiter is queued for n, as c's Inspect says
// (failing t after 10 s), or after a pause where c has no Inspect.
func queued(t *testing.T, ctx context.Context, c Client, n, what string) {
	t.Helper()
	if c.Inspect == nil {
		time.Sleep(300 * time.Millisecond)
		return
	}
	inspectUntil(t, ctx, c.Inspect, n, what, func(i dlock.Info) bool { return len(i.Queue) == 1 })
}

// acquireLater starts l.Acquire(ctx, opts...) in the background and
// returns where its Lease comes (nil, and t failed, on an error).
func acquireLater(t *testing.T, ctx context.Context, l dlock.Locker, opts ...dlock.Option) <-chan *dlock.Lease {
	got := make(chan *dlock.Lease, 1)
	go func() {
		lease, err := l.Acquire(ctx, opts...)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	return got
}

// hammer runs workers goroutines, each taking the lock locker(worker) rounds
// times and running inside while it holds it; it fails t with the first
// error of an Acquire or Unlock.
func hammer(t *testing.T, ctx context.Context, workers, rounds int, locker func(worker int) dlock.Locker, inside func(worker int, l *dlock.Lease)) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for i := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := locker(i).Acquire(ctx)
				if err != nil {
					errs <- err
					return
				}
				inside(i, l)
				if err := l.Unlock(ctx); err != nil {
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
