package seam

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// lineSvc is a lock service that keeps waiters in line, in memory: the
// first ticket of its line holds the lock. Its fault switches are read
// under mu.
type lineSvc struct {
	mu      sync.Mutex
	line    []*ticket
	changed chan struct{} // closed at every change of line
	moved   chan struct{} // closed at every release of mu (waitFor's wake-up)
	next    int64
	// faults, each used up as it is taken
	joinErrs []error // Join's next errors
	lookErrs []error // Look's next errors
	late     int     // grants that come too late (Grant's nil, nil)
	// detail: Wait's ctx error comes with it, named as the call's
	// (Wrap), as a backend that adds its own detail returns it
	detail string
	// counts
	joins, waits, leaves, grants int
}

type ticket struct {
	n      int64
	in     bool          // still in line
	looked chan struct{} // the service's changed at the last Look: closed once the line moved since
}

func newLineSvc() *lineSvc {
	return &lineSvc{changed: make(chan struct{}), moved: make(chan struct{})}
}

// unlock releases mu and wakes waitFor: every change is made under mu.
func (s *lineSvc) unlock() {
	close(s.moved)
	s.moved = make(chan struct{})
	s.mu.Unlock()
}

// changedLocked wakes the waiters; mu is held.
func (s *lineSvc) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

func (s *lineSvc) remove(t *ticket) {
	s.mu.Lock()
	defer s.unlock()
	s.removeLocked(t)
}

func (s *lineSvc) removeLocked(t *ticket) {
	for i, x := range s.line {
		if x == t {
			s.line = append(s.line[:i], s.line[i+1:]...)
			t.in = false
			s.changedLocked()
			return
		}
	}
}

// svcLine is one Acquire's Line on s.
type svcLine struct {
	s *lineSvc
	k *Keeper[*ticketOps]
}

func take(errs *[]error) error {
	if len(*errs) == 0 {
		return nil
	}
	err := (*errs)[0]
	*errs = (*errs)[1:]
	return err
}

var errBlip = errors.New("blip")

func (l svcLine) Transient(err error) bool { return errors.Is(err, errBlip) }

func (l svcLine) Join(ctx context.Context) (*ticket, bool, error) {
	s := l.s
	s.mu.Lock()
	defer s.unlock()
	s.joins++
	if err := take(&s.joinErrs); err != nil {
		return nil, false, err
	}
	s.next++
	t := &ticket{n: s.next, in: true}
	s.line = append(s.line, t)
	return t, true, nil
}

func (l svcLine) Look(ctx context.Context, t *ticket) (Stand, error) {
	s := l.s
	s.mu.Lock()
	defer s.unlock()
	if err := take(&s.lookErrs); err != nil {
		return Behind, err
	}
	switch {
	case !t.in:
		return Gone, nil
	case s.line[0] == t:
		return Granted, nil
	}
	t.looked = s.changed
	return Behind, nil
}

func (l svcLine) Wait(ctx context.Context, t *ticket) (bool, error) {
	s := l.s
	s.mu.Lock()
	s.waits++
	ch := t.looked // a change between the Look and now wakes this Wait at once
	detail := s.detail
	s.unlock()
	select {
	case <-ch:
		return false, nil
	case <-ctx.Done():
		if detail != "" {
			return false, Wrap("acquire", "mutex", "n", fmt.Errorf("%w (%s)", ctx.Err(), detail))
		}
		return false, ctx.Err()
	}
}

func (l svcLine) Grant(ctx context.Context, t *ticket) (*Lease, error) {
	s := l.s
	s.mu.Lock()
	s.grants++
	late := s.late > 0
	if late {
		s.late--
		s.removeLocked(t)
	}
	s.unlock()
	if late {
		return nil, nil
	}
	return l.k.Lease(ctx, Grant[*ticketOps]{Shape: "mutex", Name: "n", Token: t.n, Sent: time.Now(), TTL: time.Minute, Ops: &ticketOps{s, t}})
}

func (l svcLine) Leave(t *ticket) {
	l.s.mu.Lock()
	l.s.leaves++
	l.s.unlock()
	l.s.remove(t)
}

// ticketOps is a granted ticket: its release leaves the line.
type ticketOps struct {
	s *lineSvc
	t *ticket
}

func (o *ticketOps) Release(context.Context) (Released, error) {
	o.s.remove(o.t)
	return ReleasedFree, nil
}
func (o *ticketOps) Extend(context.Context, time.Duration) (bool, error) { return true, nil }
func (o *ticketOps) Verify(context.Context) (bool, error)                { return true, nil }

// queueOn runs one Acquire through Queue on s, with a client context
// that client ends (nil: one that never ends).
func queueOn(ctx context.Context, k *Keeper[*ticketOps], s *lineSvc, client context.Context, opts ...Option) (l *Lease, err error) {
	if client == nil {
		client = context.Background()
	}
	a, err := k.Begin(ctx, Request{Shape: "mutex", Name: "n"}, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = a.End(l, err) }()
	wctx, cancel := a.WaitContext(time.Second, client)
	defer cancel()
	return Queue(wctx, &a, svcLine{s, k}, func() bool { return client.Err() != nil }, "svc")
}

// TestQueueExclusion: callers that queue on one line hold it one at a
// time, each granted in turn (overlap witness), and leave nothing behind.
func TestQueueExclusion(t *testing.T) {
	k := NewKeeper[*ticketOps](nil, nil)
	defer k.Close(context.Background(), nil)
	s := newLineSvc()
	var inside, overlaps, granted atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				l, err := queueOn(context.Background(), k, s, nil, Wait(10*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				granted.Add(1)
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				if err := l.Unlock(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if overlaps.Load() != 0 || granted.Load() != 40 {
		t.Fatalf("%d overlaps, %d grants (want 0, 40)", overlaps.Load(), granted.Load())
	}
	if len(s.line) != 0 {
		t.Fatalf("%d tickets left in line", len(s.line))
	}
}

// holdLine takes s's lock for the test.
func holdLine(t *testing.T, k *Keeper[*ticketOps], s *lineSvc) *Lease {
	t.Helper()
	l, err := queueOn(context.Background(), k, s, nil, Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestQueueTry: a try of a held lock is refused without waiting, its
// place left; a try that keeps losing its place is refused after
// tryRejoins more joins.
func TestQueueTry(t *testing.T) {
	k := NewKeeper[*ticketOps](nil, nil)
	defer k.Close(context.Background(), nil)
	s := newLineSvc()
	l := holdLine(t, k, s)
	_, err := queueOn(context.Background(), k, s, nil, Wait(0))
	if !errors.Is(err, ErrNotAcquired) || strings.Contains(err.Error(), "svc:") {
		t.Fatalf("try of a held lock: %v", err)
	}
	if s.waits != 0 || s.leaves != 1 || len(s.line) != 1 {
		t.Fatalf("waits %d, leaves %d, line %d (want 0, 1, 1)", s.waits, s.leaves, len(s.line))
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.joins, s.late = 0, 100 // every grant too late
	if _, err := queueOn(context.Background(), k, s, nil, Wait(0)); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("try that keeps losing its grant: %v", err)
	}
	if s.joins != tryRejoins+1 {
		t.Fatalf("%d joins (want %d)", s.joins, tryRejoins+1)
	}
}

// TestQueueWait: a waiter is granted when the holder leaves; one whose
// place is lost joins again; one granted too late joins again; a Wait
// that runs out is refused, its place left.
func TestQueueWait(t *testing.T) {
	k := NewKeeper[*ticketOps](nil, nil)
	defer k.Close(context.Background(), nil)
	s := newLineSvc()
	l := holdLine(t, k, s)
	s.late = 1
	done := make(chan error, 1)
	go func() {
		w, err := queueOn(context.Background(), k, s, nil, Wait(10*time.Second))
		if err == nil {
			err = w.Unlock(context.Background())
		}
		done <- err
	}()
	if err := waitFor(s, func() bool { return s.waits == 1 }); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.removeLocked(s.line[1]) // the waiter's place is lost (its session ended, say)
	s.unlock()
	if err := waitFor(s, func() bool { return s.joins == 3 && s.waits == 2 }); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// joins: the holder's, the waiter's, again after its place was lost,
	// again after its first grant came too late
	if s.joins != 4 || s.grants != 3 || len(s.line) != 0 {
		t.Fatalf("joins %d, grants %d, line %d (want 4, 3, 0)", s.joins, s.grants, len(s.line))
	}

	l = holdLine(t, k, s)
	defer l.Unlock(context.Background())
	start := time.Now()
	_, err := queueOn(context.Background(), k, s, nil, Wait(50*time.Millisecond))
	if !errors.Is(err, ErrNotAcquired) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("wait that runs out: %v after %v", err, time.Since(start))
	}
	if len(s.line) != 1 {
		t.Fatalf("line %d after a wait ran out (want the holder's only)", len(s.line))
	}
}

// waitFor waits until cond holds under s.mu, for at most 10 s.
func waitFor(s *lineSvc, cond func() bool) error {
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		ok, moved := cond(), s.moved
		s.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-moved:
		case <-deadline.C:
			return errors.New("condition not reached in 10s")
		}
	}
}

// TestQueueErrors: a transient error is tried again within the wait, and
// names itself in the refusal when the wait runs out; another error ends
// the call, its place left; a try does not retry; the caller's end and
// the client's Close are what Acquire returns.
func TestQueueErrors(t *testing.T) {
	k := NewKeeper[*ticketOps](nil, nil)
	defer k.Close(context.Background(), nil)
	ctx := context.Background()
	s := newLineSvc()
	s.joinErrs = []error{errBlip, errBlip}
	s.lookErrs = []error{errBlip}
	l, err := queueOn(ctx, k, s, nil, Wait(10*time.Second))
	if err != nil {
		t.Fatalf("transient errors within the wait: %v", err)
	}
	l.Unlock(ctx)

	s.lookErrs = []error{errBlip}
	if _, err := queueOn(ctx, k, s, nil, Wait(0)); !errors.Is(err, errBlip) {
		t.Fatalf("a try retried a transient error: %v", err)
	}

	s.joinErrs = make([]error, 1000)
	for i := range s.joinErrs {
		s.joinErrs[i] = errBlip
	}
	_, err = queueOn(ctx, k, s, nil, Wait(100*time.Millisecond))
	if !errors.Is(err, ErrNotAcquired) || !strings.Contains(err.Error(), "(svc: blip)") {
		t.Fatalf("a wait that ran out on transient errors: %v", err)
	}
	s.joinErrs = nil

	bad := errors.New("bad")
	s.lookErrs = []error{bad}
	if _, err := queueOn(ctx, k, s, nil, Wait(time.Second)); !errors.Is(err, bad) || errors.Is(err, ErrNotAcquired) {
		t.Fatalf("another error: %v", err)
	}
	if len(s.line) != 0 {
		t.Fatalf("line %d after an error (want 0)", len(s.line))
	}

	held := holdLine(t, k, s)
	defer held.Unlock(ctx)
	cctx, cancel := context.WithCancel(ctx)
	go func() {
		if err := waitFor(s, func() bool { return len(s.line) == 2 }); err != nil {
			t.Error(err)
		}
		cancel()
	}()
	if _, err := queueOn(cctx, k, s, nil); !errors.Is(err, context.Canceled) || errors.Is(err, ErrNotAcquired) {
		t.Fatalf("the caller gave up: %v", err)
	}
	client, closeClient := context.WithCancel(ctx)
	go func() {
		if err := waitFor(s, func() bool { return len(s.line) == 2 }); err != nil {
			t.Error(err)
		}
		closeClient()
	}()
	if _, err := queueOn(ctx, k, s, client); !errors.Is(err, ErrClosed) {
		t.Fatalf("the client closed: %v", err)
	}
	if len(s.line) != 1 {
		t.Fatalf("line %d (want the holder's only)", len(s.line))
	}
}

// TestQueueKeepsDetail: a caller that gives up gets its ctx's error; the
// line's own words on it come too when the line named the call (Wrap), not
// when it did not.
func TestQueueKeepsDetail(t *testing.T) {
	k := NewKeeper[*ticketOps](nil, nil)
	defer k.Close(context.Background(), nil)
	ctx := context.Background()
	s := newLineSvc()
	held := holdLine(t, k, s)
	defer held.Unlock(ctx)
	for _, named := range []bool{true, false} {
		s.mu.Lock()
		s.detail = "the line's detail"
		s.unlock()
		cctx, cancel := context.WithCancel(ctx)
		go func() {
			if err := waitFor(s, func() bool { return len(s.line) == 2 }); err != nil {
				t.Error(err)
			}
			cancel()
		}()
		var l *Lease
		var err error
		if named {
			l, err = queueOn(cctx, k, s, nil)
		} else {
			// the line's error unnamed: a bare ctx error with words of its own
			a, berr := k.Begin(cctx, Request{Shape: "mutex", Name: "n"}, nil)
			if berr != nil {
				t.Fatal(berr)
			}
			l, err = Queue(a.Store, &a, unnamedLine{svcLine{s, k}}, func() bool { return false }, "svc")
			err = a.End(l, err)
		}
		if l != nil || !errors.Is(err, context.Canceled) || errors.Is(err, ErrNotAcquired) {
			t.Fatalf("named %v: the caller gave up: %v, %v", named, l, err)
		}
		if got := strings.Contains(err.Error(), "(the line's detail)"); got != named {
			t.Fatalf("named %v: %q carries the line's detail: %v", named, err, got)
		}
		if want := `dlock: acquire mutex "n": context canceled`; !strings.HasPrefix(err.Error(), want) {
			t.Fatalf("named %v: %q, want it to start %q", named, err, want)
		}
	}
	if len(s.line) != 1 {
		t.Fatalf("line %d (want the holder's only)", len(s.line))
	}
}

// unnamedLine is svcLine whose Wait drops the call's name from its error.
type unnamedLine struct{ svcLine }

func (l unnamedLine) Wait(ctx context.Context, t *ticket) (bool, error) {
	gone, err := l.svcLine.Wait(ctx, t)
	var e *opError
	if errors.As(err, &e) {
		err = e.err
	}
	return gone, err
}

// TestWaitContext: the wait's context ends at the Wait's end, after the
// try bound for a try, and at the client's end; with no client and no
// Wait it is the call's Store itself.
func TestWaitContext(t *testing.T) {
	k := NewKeeper[*ticketOps](nil, nil)
	defer k.Close(context.Background(), nil)
	begin := func(opts ...Option) Acquisition {
		a, err := k.Begin(context.Background(), Request{Shape: "mutex", Name: "n"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a := begin()
	ctx, cancel := a.WaitContext(time.Second, nil)
	if ctx != a.Store {
		t.Fatal("no Wait, no client: not the call's Store")
	}
	cancel()
	a.End(nil, ErrNotAcquired)

	a = begin(Wait(time.Hour))
	ctx, cancel = a.WaitContext(time.Second, nil)
	if d, ok := ctx.Deadline(); !ok || !d.Equal(a.Until()) {
		t.Fatalf("Wait(1h): deadline %v %v, want %v", d, ok, a.Until())
	}
	cancel()
	a.End(nil, ErrNotAcquired)

	a = begin(Wait(0))
	ctx, cancel = a.WaitContext(time.Second, nil)
	if d, ok := ctx.Deadline(); !ok || d.Sub(a.Start) < time.Second || d.Sub(a.Start) > 2*time.Second {
		t.Fatalf("Wait(0): deadline %v after the start, want the try bound (1s)", d.Sub(a.Start))
	}
	cancel()
	a.End(nil, ErrNotAcquired)

	a = begin()
	client, closeClient := context.WithCancel(context.Background())
	ctx, cancel = a.WaitContext(time.Second, client)
	defer cancel()
	if ctx.Err() != nil {
		t.Fatal("ended before the client closed")
	}
	closeClient()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the client's end did not end the wait's context")
	}
	a.End(nil, ErrNotAcquired)
}
