package election_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/leakcheck"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/redis/go-redis/v9"
)

// exampleAddr is a redis-server shared by the Example functions.
var exampleAddr string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	srv, err := redisproc.Start(ctx, redisproc.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exampleAddr = srv.Addr()
	code := m.Run()
	_ = srv.Close()
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// schedule runs the scheduler on one replica at a time: every replica
// calls it, and the one that leads runs work until it loses leadership
// (then it campaigns again) or ctx ends.
func schedule(ctx context.Context, locks *dlock.Client, logger *slog.Logger, work func(ctx context.Context, token int64) error) error {
	e := election.New(locks.Mutex("scheduler"), locks) // any backend's lock and Inspector
	go func() {
		for who := range e.Observe(ctx, time.Second) { // who leads, at every change
			logger.Info("leader", "leading", who.Leading, "host", who.Holder.Host, "pid", who.Holder.PID, "token", who.Holder.Fence)
		}
	}()
	return e.Lead(ctx, func(term election.Term) error {
		// term.Context is cancelled if leadership is lost; fence the
		// leader's writes with term.Token.
		return work(term.Context, term.Token)
	})
}

func ExampleElection_Lead() {
	rdb := redis.NewClient(&redis.Options{Addr: exampleAddr})
	defer rdb.Close()
	c, err := dlock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	err = schedule(ctx, c, slog.New(slog.DiscardHandler), func(ctx context.Context, token int64) error {
		fmt.Println("leading, token > 0:", token > 0)
		cancel() // this example stops after one term
		<-ctx.Done()
		return nil
	})
	fmt.Println(err)
	// Output:
	// leading, token > 0: true
	// context canceled
}

func newClient(t *testing.T, rdb *redis.Client) *dlock.Client {
	t.Helper()
	c, err := dlock.New(rdb, dlock.Config{TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Three replicas campaign: one leads at a time (an overlap witness over
// the terms), every term's token is larger than the one before, and a
// leader whose term ends (fn returns) lets the next one in.
func TestOneLeaderAtATime(t *testing.T) {
	rdb := redistest.Client(t, redistest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var w witness.Witness
	var mu sync.Mutex
	var tokens []int64
	var wg sync.WaitGroup
	for range 3 {
		c := newClient(t, rdb)
		e := election.New(c.Mutex("leader"), c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.Lead(ctx, func(term election.Term) error {
				w.Enter("leader")
				mu.Lock()
				tokens = append(tokens, term.Token)
				mu.Unlock()
				select {
				case <-time.After(50 * time.Millisecond):
				case <-term.Context.Done():
				}
				w.Exit("leader")
				return nil
			})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Lead = %v, want the ctx's deadline", err)
			}
		}()
	}
	wg.Wait()
	if n := w.Overlaps(); n != 0 {
		t.Fatalf("%d overlapping terms", n)
	}
	if len(tokens) < 5 {
		t.Fatalf("%d terms in 3 s, want leadership to rotate", len(tokens))
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("term %d's token %d is not above the one before, %d", i, tokens[i], tokens[i-1])
		}
	}
}

// A leader that loses its lock (deleted behind its back) sees its term's
// Context cancelled with cause ErrLockLost; another replica leads, and
// Observe reports the new leader with its token.
func TestLeaderLossAndObserve(t *testing.T) {
	rdb := redistest.Client(t, redistest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := newClient(t, rdb), newClient(t, rdb)
	ea, eb := election.New(a.Mutex("ldr"), a), election.New(b.Mutex("ldr"), b)
	obs := eb.Observe(ctx, 20*time.Millisecond)
	if first := <-obs; first.Leading {
		t.Fatalf("a leader before anyone campaigned: %+v", first)
	}
	aLeads, aLost := make(chan election.Term, 1), make(chan error, 1)
	go ea.Lead(ctx, func(term election.Term) error {
		aLeads <- term
		<-term.Context.Done()
		aLost <- context.Cause(term.Context)
		<-ctx.Done() // stay out of the way: a does not campaign again until the end
		return ctx.Err()
	})
	term := <-aLeads
	seen := waitLeader(t, obs, func(l election.Leader) bool { return l.Leading && l.Holder.Fence == term.Token })
	if seen.Holder.PID == 0 || seen.Holder.Host == "" {
		t.Fatalf("Observe: no holder metadata in %+v", seen)
	}
	bLeads := make(chan election.Term, 1)
	go eb.Lead(ctx, func(term election.Term) error {
		bLeads <- term
		<-term.Context.Done()
		return nil
	})
	if err := rdb.Del(ctx, "dlock:{ldr}").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-aLost:
		if !errors.Is(cause, dlock.ErrLockLost) {
			t.Fatalf("the deposed leader's cause: %v", cause)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the leader was not told it lost its lock")
	}
	var bt election.Term
	select {
	case bt = <-bLeads:
	case <-time.After(10 * time.Second):
		t.Fatal("no new leader after the loss")
	}
	if bt.Token <= term.Token {
		t.Fatalf("new term's token %d not above the old %d", bt.Token, term.Token)
	}
	waitLeader(t, obs, func(l election.Leader) bool { return l.Leading && l.Holder.Fence == bt.Token })
}

func waitLeader(t *testing.T, obs <-chan election.Leader, want func(election.Leader) bool) election.Leader {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-obs:
			if !ok {
				t.Fatal("Observe closed")
			}
			if want(l) {
				return l
			}
		case <-deadline:
			t.Fatal("Observe did not report the leader")
		}
	}
}

func TestBadInput(t *testing.T) {
	err := election.New(nil, nil).Lead(context.Background(), func(election.Term) error { return nil })
	dlocktest.CheckError(t, err, dlock.ErrInvalidArgument, "dlock: lead: ")
	rdb := redistest.Client(t, redistest.Start(t))
	c := newClient(t, rdb)
	if err := election.New(c.Mutex(""), c).Lead(context.Background(), func(election.Term) error { return nil }); !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf("empty name: %v", err)
	}
	e := election.New(c.Mutex("bad-input"), c)
	//lint:ignore SA1012 a nil ctx is the bad input under test
	err = e.Lead(nil, func(election.Term) error { return nil }) //nolint:staticcheck
	dlocktest.CheckError(t, err, dlock.ErrInvalidArgument, `dlock: lead "bad-input": `)
	_, err = e.Leader(nil) //nolint:staticcheck
	dlocktest.CheckError(t, err, dlock.ErrInvalidArgument, `dlock: leader "bad-input": `)
	err = e.Lead(context.Background(), nil)
	dlocktest.CheckError(t, err, dlock.ErrInvalidArgument, `dlock: lead "bad-input": `)
	_, err = election.New(c.Mutex("bad-input"), nil).Leader(context.Background())
	dlocktest.CheckError(t, err, dlock.ErrInvalidArgument, `dlock: leader "bad-input": `)
	if _, ok := <-e.Observe(nil, time.Second); ok { //nolint:staticcheck
		t.Fatal("Observe(nil ctx) sent a leader; want a closed channel")
	}
	_, err = election.New(nil, c).Leader(context.Background())
	dlocktest.CheckError(t, err, dlock.ErrInvalidArgument, "dlock: leader: ")
	// A key of another type under the lock's name ends Lead (it would
	// never be elected), instead of campaigning for ever.
	if err := rdb.Set(context.Background(), dlock.DefaultPrefix+"{wrong-type}", "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := election.New(c.Lock("wrong-type"), c).Lead(ctx, func(election.Term) error { return nil }); !errors.Is(err, dlock.ErrWrongType) {
		t.Fatalf("Lead on a key of another type: %v, want ErrWrongType", err)
	}
}

// TestCampaignsPaced: a standby that campaigns with Wait(0) while another
// replica leads tries again no sooner than every 200 ms, not in a busy
// loop against the store.
func TestCampaignsPaced(t *testing.T) {
	rdb := redistest.Client(t, redistest.Start(t))
	leader, standby := newClient(t, rdb), newClient(t, rdb)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held, err := leader.Mutex("paced").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	ctx2, cancel2 := context.WithTimeout(ctx, time.Second)
	defer cancel2()
	lk := &countingLocker{Locker: standby.Mutex("paced")}
	err = election.New(lk, standby, dlock.Wait(0)).Lead(ctx2, func(election.Term) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lead: %v, want the ctx's deadline", err)
	}
	if n := lk.calls.Load(); n < 2 || n > 7 {
		t.Fatalf("%d campaigns in 1 s with Wait(0); want about 5 (one per 200 ms)", n)
	}
}

// countingLocker counts its Acquire calls.
type countingLocker struct {
	dlock.Locker
	calls atomic.Int64
}

func (l *countingLocker) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	l.calls.Add(1)
	return l.Locker.Acquire(ctx, opts...)
}

// TestLeadEndsWithFnCanceledError: fn's error ends Lead when the term was
// not lost, also an error that wraps context.Canceled (the leader's own
// call cancelled): only nil or a lost term makes Lead campaign again.
func TestLeadEndsWithFnCanceledError(t *testing.T) {
	rdb := redistest.Client(t, redistest.Start(t))
	c := newClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	own := fmt.Errorf("the leader's own call: %w", context.Canceled)
	terms := 0
	err := election.New(c.Mutex("canceled-error"), c).Lead(ctx, func(election.Term) error {
		terms++
		if terms > 1 {
			cancel()
		}
		return own
	})
	if !errors.Is(err, own) || terms != 1 {
		t.Fatalf("Lead after fn returned %v: %v after %d terms, want fn's error after one term", own, err, terms)
	}
}
