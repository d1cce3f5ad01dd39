package dlocktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/election"
	"github.com/dlockgo/dlock/internal/witness"
)

// inspectorFunc is a Client's Inspect as an election.Inspector.
type inspectorFunc func(ctx context.Context, name string) (dlock.Info, error)

func (f inspectorFunc) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	return f(ctx, name)
}

// elections returns n clients and each one's election on name (its
// Mutex, observed by its Inspect), skipping t if the backend lacks them.
func (s *suite) elections(t *testing.T, n int, name string) ([]Client, []*election.Election) {
	t.Helper()
	cs := make([]Client, n)
	es := make([]*election.Election, n)
	for i := range cs {
		cs[i] = s.b.NewClient(t)
		if cs[i].Mutex == nil || cs[i].Inspect == nil {
			t.Skip("the backend client has no Mutex or no Inspect")
		}
		es[i] = election.New(cs[i].Mutex(name), inspectorFunc(cs[i].Inspect))
	}
	return cs, es
}

// electionTerms: three replicas campaign, each term ending by itself after
// a moment: one leads at a time (an overlap witness over the terms), each
// term's token is above the one before, and leadership passes around.
func (s *suite) electionTerms(t *testing.T) {
	n := name(t)
	_, es := s.elections(t, 3, n)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var w witness.Witness
	var mu sync.Mutex
	var tokens []int64
	var wg sync.WaitGroup
	for _, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := e.Lead(ctx, func(term election.Term) error {
				w.Enter(n)
				mu.Lock()
				tokens = append(tokens, term.Token)
				mu.Unlock()
				select {
				case <-time.After(20 * time.Millisecond):
				case <-term.Context.Done():
				}
				w.Exit(n)
				return nil
			})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Lead: %v, want the ctx's deadline", err)
			}
		}()
	}
	wg.Wait()
	if o := w.Overlaps(); o != 0 {
		t.Fatalf("%d overlapping terms in %d", o, w.Entries())
	}
	if len(tokens) < 3 {
		t.Fatalf("%d terms in 3 s, want leadership to pass around", len(tokens))
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("term %d's token %d is not above the one before, %d", i, tokens[i], tokens[i-1])
		}
	}
	t.Logf("%d terms in 3 s", len(tokens))
}

// term is one term of electionFailover's replicas.
type term struct {
	replica int
	election.Term
}

// electionFailover: three replicas lead until their term is lost; the
// leader's client is closed, twice: its term's Context ends (cause
// ErrLockLost) before the next term begins, another replica leads within
// a hand-off, its token is above the last, and Observe (from a fourth
// client) reports every leader with its token.
func (s *suite) electionFailover(t *testing.T) {
	n := name(t)
	cs, es := s.elections(t, 4, n)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	obs := es[3].Observe(ctx, 20*time.Millisecond)
	started := make(chan term, 8)
	var mu sync.Mutex
	var terms []term
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i, e := range es[:3] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Lead(ctx, func(tm election.Term) error {
				mu.Lock()
				for _, prev := range terms {
					if prev.Context.Err() == nil {
						t.Errorf("replica %d's term (token %d) began while replica %d's (token %d) had not ended", i, tm.Token, prev.replica, prev.Token)
					}
				}
				terms = append(terms, term{i, tm})
				mu.Unlock()
				started <- term{i, tm}
				<-tm.Context.Done()
				return nil
			})
		}()
	}
	// observed waits until Observe reports the leader of tm.
	observed := func(tm term) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case l, ok := <-obs:
				if !ok {
					t.Fatal("Observe ended")
				}
				if l.Leading && l.Holder.Fence == tm.Token {
					return
				}
			case <-deadline:
				t.Fatalf("Observe never reported the leader with token %d", tm.Token)
			}
		}
	}
	next := func(what string) term {
		t.Helper()
		select {
		case tm := <-started:
			return tm
		case <-time.After(20 * time.Second):
			t.Fatalf("no leader %s", what)
		}
		panic("unreachable")
	}
	cur := next("at first")
	observed(cur)
	closed := map[int]bool{}
	for range 2 {
		if err := cs[cur.replica].Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		closed[cur.replica] = true
		at := time.Now()
		nt := next("after the leader's client was closed")
		gap := time.Since(at)
		if closed[nt.replica] {
			t.Fatalf("replica %d, closed, leads again", nt.replica)
		}
		if cause := context.Cause(cur.Context); !errors.Is(cause, dlock.ErrLockLost) {
			t.Fatalf("the closed leader's term ended with %v, want ErrLockLost", cause)
		}
		if nt.Token <= cur.Token {
			t.Fatalf("the next term's token %d is not above %d", nt.Token, cur.Token)
		}
		if bound := 5 * time.Second; gap > bound {
			t.Fatalf("the next leader came %v after the leader's client was closed, want within %v", gap, bound)
		}
		t.Logf("replica %d led %v after replica %d's client was closed", nt.replica, gap.Round(time.Millisecond), cur.replica)
		observed(nt)
		cur = nt
	}
	cancel()
	wg.Wait()
	for i, err := range errs {
		want := context.Canceled
		if closed[i] {
			want = dlock.ErrClosed
		}
		if !errors.Is(err, want) {
			t.Errorf("replica %d's Lead: %v, want %v", i, err, want)
		}
	}
}

// panicReleases: a function that panics under Do or under Lead releases
// the lock, and the panic goes on with its value: the next holder gets the
// lock at once, not when a lease would run out (a recovered panic of a
// leader must not keep leadership for as long as the process lives).
func (s *suite) panicReleases(t *testing.T) {
	n := name(t)
	cs, es := s.elections(t, 2, n)
	ctx := testCtx(t, 30*time.Second)
	type boom struct{ where string }
	recovered := func(where string, run func()) {
		t.Helper()
		defer func() {
			if r := recover(); r != (boom{where}) {
				t.Fatalf("%s: recovered %v, want the function's panic", where, r)
			}
		}()
		run()
		t.Fatalf("%s returned after its function panicked", where)
	}
	recovered("Do", func() {
		_ = dlock.Do(ctx, cs[0].Mutex(n), func(context.Context, *dlock.Lease) error { panic(boom{"Do"}) })
	})
	l, err := cs[1].Mutex(n).Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("the lock after a panic under Do: %v, want it released", err)
	}
	unlock(t, l)
	var term election.Term
	recovered("Lead", func() {
		_ = es[0].Lead(ctx, func(tm election.Term) error {
			term = tm
			panic(boom{"Lead"})
		})
	})
	if err := term.Context.Err(); err == nil {
		t.Fatal("the term of a leader whose function panicked has not ended")
	}
	l, err = cs[1].Mutex(n).Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("the lock after a panic under Lead: %v, want it released", err)
	}
	unlock(t, l)
}
