package dlocktest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/dlockgo/dlock/seam"
)

// multi returns n clients' MultiLock constructors, skipping t if the
// backend has none; ok is false (and t done) for a backend that documents
// it has none, once its refusal was checked.
func (s *suite) multi(t *testing.T, n int) ([]func(...string) dlock.Locker, bool) {
	t.Helper()
	cs := make([]func(...string) dlock.Locker, n)
	for i := range cs {
		c := s.b.NewClient(t)
		if c.MultiLock == nil {
			t.Skip("the backend has no MultiLock")
		}
		cs[i] = c.MultiLock
	}
	if s.b.MultiLockUnsupported {
		ctx := testCtx(t, 10*time.Second)
		if _, err := cs[0](name(t)+".a", name(t)+".b").Acquire(ctx, dlock.Wait(0)); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("MultiLock of a backend without one: %v, want errors.ErrUnsupported", err)
		}
		return nil, false
	}
	return cs, true
}

// multiAllOrNone: a MultiLock one of whose names is held takes none of
// them; once all are free it takes all, each excluding the Lock of its
// name, and its Unlock frees them all.
func (s *suite) multiAllOrNone(t *testing.T) {
	ms, ok := s.multi(t, 1)
	if !ok {
		return
	}
	other := s.b.NewClient(t)
	if other.Lock == nil {
		t.Skip("the backend has no Lock")
	}
	ctx := testCtx(t, 30*time.Second)
	base := name(t)
	a, b, c := base+".a", base+".b", base+".c"
	held := acquire(t, ctx, other.Lock(b))
	// Names in any order: the lock is the same.
	if _, err := ms[0](c, b, a).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("MultiLock with a member held: %v, want ErrNotAcquired", err)
	}
	if _, err := ms[0](a, b, c).Acquire(ctx, dlock.Wait(300*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("MultiLock waiting 300ms for a held member: %v, want ErrNotAcquired", err)
	}
	// Nothing was kept of the attempts: the free members are free.
	for _, n := range []string{a, c} {
		l := acquire(t, ctx, other.Lock(n), dlock.Wait(0))
		unlock(t, l)
	}
	got := acquireLater(t, ctx, ms[0](b, c, a), dlock.Wait(20*time.Second))
	select {
	case <-got:
		t.Fatal("the MultiLock was granted while a member was held")
	case <-time.After(200 * time.Millisecond):
	}
	unlock(t, held)
	m := <-got
	if m == nil {
		return
	}
	if m.Token() <= held.Token() {
		t.Errorf("MultiLock token %d not above the token %d of the Lock it waited for", m.Token(), held.Token())
	}
	for _, n := range []string{a, b, c} {
		if _, err := other.Lock(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("Lock %q while a MultiLock holds it: %v, want ErrNotAcquired", n, err)
		}
	}
	if err := m.Verify(ctx); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	unlock(t, m)
	for _, n := range []string{a, b, c} {
		l := acquire(t, ctx, other.Lock(n), dlock.Wait(5*time.Second))
		unlock(t, l)
	}
}

// multiMutualExclusion: MultiLocks over overlapping names, taken by 3
// clients at once (each set in its own order), never overlap on a name,
// never deadlock, and a name's grants have increasing tokens.
func (s *suite) multiMutualExclusion(t *testing.T) {
	ms, ok := s.multi(t, 3)
	if !ok {
		return
	}
	ctx := testCtx(t, 90*time.Second)
	base := name(t)
	n := func(i int) string { return fmt.Sprintf("%s.%d", base, i) }
	sets := [][]string{{n(0), n(1)}, {n(2), n(1)}, {n(2), n(0)}, {n(0), n(1), n(2)}, {n(1)}}
	var w witness.Witness
	var mu sync.Mutex
	tokens := map[string][]int64{}
	hammer(t, ctx, 9, 5, func(i int) dlock.Locker { return ms[i%3](sets[i%len(sets)]...) }, func(i int, l *dlock.Lease) {
		set := sets[i%len(sets)]
		mu.Lock()
		for _, x := range set {
			tokens[x] = append(tokens[x], l.Token())
		}
		mu.Unlock()
		for _, x := range set {
			w.Enter(x)
		}
		time.Sleep(time.Millisecond)
		for _, x := range set {
			w.Exit(x)
		}
	})
	if o := w.Overlaps(); o != 0 {
		t.Fatalf("%d overlaps on a name in %d entries", o, w.Entries())
	}
	for x, ts := range tokens {
		for i := 1; i < len(ts); i++ {
			if ts[i] <= ts[i-1] {
				t.Fatalf("name %s: grant %d has token %d after %d", x, i, ts[i], ts[i-1])
			}
		}
	}
}

// multiBadInput: no names, a name twice, an invalid name: refused, nothing
// taken.
func (s *suite) multiBadInput(t *testing.T) {
	ms, ok := s.multi(t, 1)
	if !ok {
		return
	}
	ctx := testCtx(t, 10*time.Second)
	x := name(t)
	for _, tc := range []struct {
		names []string
		want  error
	}{
		{nil, dlock.ErrInvalidArgument},
		{[]string{x, x}, dlock.ErrInvalidArgument},
		{[]string{x, ""}, dlock.ErrInvalidName},
		{[]string{x, strings.Repeat("y", seam.MaxNameLen+1)}, dlock.ErrInvalidName},
	} {
		if _, err := ms[0](tc.names...).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, tc.want) {
			t.Errorf("MultiLock(%d names): %v, want %v", len(tc.names), err, tc.want)
		}
	}
	l := acquire(t, ctx, ms[0](x), dlock.Wait(0))
	unlock(t, l)
}
