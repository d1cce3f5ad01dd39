package seam

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "n" + strconv.Itoa(i)
	}
	return out
}

// Every name is inspected once, at most workers at a time (and that many
// do run together); only the kept ones are returned.
func TestCollect(t *testing.T) {
	for _, workers := range []int{-1, 0, 1, 4, 16} {
		t.Run(strconv.Itoa(workers), func(t *testing.T) {
			var running, peak, calls atomic.Int32
			got, err := collect(context.Background(), names(100), workers, func(ctx context.Context, name string) (string, bool, error) {
				calls.Add(1)
				n := running.Add(1)
				defer running.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(time.Millisecond)
				i, _ := strconv.Atoi(name[1:])
				return name, i%2 == 0, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := max(workers, 1)
			if calls.Load() != 100 || peak.Load() > int32(want) || want > 1 && peak.Load() < 2 {
				t.Errorf("%d calls, %d at once; want 100, at most %d", calls.Load(), peak.Load(), want)
			}
			slices.Sort(got)
			var even []string
			for i, n := range names(100) {
				if i%2 == 0 {
					even = append(even, n)
				}
			}
			slices.Sort(even)
			if !slices.Equal(got, even) {
				t.Errorf("kept %v, want the even ones", got)
			}
		})
	}
	got, err := collect(context.Background(), nil, 16, func(context.Context, string) (int, bool, error) {
		t.Fatal("inspect called with no names")
		return 0, false, nil
	})
	if got != nil || err != nil {
		t.Errorf("no names: %v, %v", got, err)
	}
}

// The first error ends the others' ctx, no further call starts, and it is
// returned with no infos.
func TestCollectError(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	got, err := collect(context.Background(), names(1000), 4, func(ctx context.Context, name string) (int, bool, error) {
		calls.Add(1)
		if name == "n10" {
			return 0, false, fmt.Errorf("inspect %s: %w", name, boom)
		}
		if name > "n10" && len(name) == 3 { // running with n10: wait for its error
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Second):
				t.Errorf("%s: ctx not ended by the error", name)
			}
		}
		return 1, true, nil
	})
	if !errors.Is(err, boom) || got != nil {
		t.Fatalf("Collect = %v, %v; want boom and nothing", got, err)
	}
	if n := calls.Load(); n > 100 {
		t.Errorf("%d calls after an error at the 11th name", n)
	}
}

// A ctx that ends is Collect's error, whatever inspect returned.
func TestCollectCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	got, err := collect(ctx, names(100), 4, func(ictx context.Context, name string) (int, bool, error) {
		if name == "n0" { // among the first 4: the others wait for the end
			cancel()
		}
		<-ictx.Done()
		return 0, false, fmt.Errorf("inspect %s: %w", name, ictx.Err())
	})
	if !errors.Is(err, context.Canceled) || got != nil {
		t.Fatalf("Collect = %v, %v; want context.Canceled", got, err)
	}
	if _, err := collect(ctx, nil, 4, func(context.Context, string) (int, bool, error) { return 0, false, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("collect(ended ctx, no names) = %v, want context.Canceled", err)
	}
}

func TestSortOldest(t *testing.T) {
	type info struct {
		name   string
		oldest time.Time
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	infos := []info{
		{"unknown:b", time.Time{}},
		{"new", at(9)},
		{"readers", at(2)},
		{"tie:b", at(5)},
		{"unknown:a", time.Time{}},
		{"tie:a", at(5)},
		{"old", at(1)},
	}
	sorted := sortOldest([][]info{infos[:3], nil, infos[3:]}, func(i info) time.Time { return i.oldest }, func(i info) string { return i.name })
	var got []string
	for _, i := range sorted {
		got = append(got, i.name)
	}
	want := []string{"old", "readers", "tie:a", "tie:b", "new", "unknown:a", "unknown:b"}
	if !slices.Equal(got, want) {
		t.Fatalf("sortOldest: %v, want %v", got, want)
	}
}

// lk is a lock as a test's Listing reads it.
type lk struct {
	name   string
	oldest time.Time
	held   bool
}

// testListing lists locks from a map; inspect counts its calls.
func testListing(locks map[string]lk, calls *atomic.Int32) Listing[lk] {
	return Listing[lk]{
		Names: func(ctx context.Context, glob string) ([]string, error) {
			var out []string
			for n := range locks {
				if MatchGlob(glob, n) {
					out = append(out, n)
				}
			}
			return append(out, ""), nil // not a valid name: left out before Inspect
		},
		InspectBatch: func(ctx context.Context, names []string) ([]lk, []error) {
			calls.Add(1)
			infos, errs := make([]lk, len(names)), make([]error, len(names))
			for i, n := range names {
				if n == "" {
					panic("an invalid name inspected")
				}
				if n == "foreign" {
					errs[i] = fmt.Errorf("%w: a key of no lock shape", ErrWrongType)
				}
				infos[i] = locks[n]
			}
			return infos, errs
		},
		Batch: 2, Workers: 2,
		Held:   func(l lk) bool { return l.held },
		Oldest: func(l lk) time.Time { return l.oldest },
		Name:   func(l lk) string { return l.name },
	}
}

// List finds the names, inspects them in batches, keeps the held ones and
// puts them oldest first; a foreign key is left out; bad input and errors
// are returned as such.
func TestListing(t *testing.T) {
	t0 := time.Now()
	locks := map[string]lk{
		"a:1":     {name: "a:1", oldest: t0.Add(2 * time.Second), held: true},
		"a:2":     {name: "a:2", oldest: t0, held: true},
		"a:3":     {name: "a:3", held: true}, // unknown age: last
		"a:free":  {name: "a:free"},
		"b:1":     {name: "b:1", oldest: t0, held: true},
		"foreign": {name: "foreign"},
	}
	var calls atomic.Int32
	l := testListing(locks, &calls)
	got, err := l.List(context.Background(), "a:*")
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, g := range got {
		order = append(order, g.name)
	}
	if !slices.Equal(order, []string{"a:2", "a:1", "a:3"}) {
		t.Errorf("listed %v, want a:2, a:1, a:3", order)
	}
	if calls.Load() != 2 { // 4 names, 2 a call
		t.Errorf("%d Inspect calls, want 2", calls.Load())
	}
	if got, err := l.List(context.Background(), ""); err != nil || len(got) != 4 {
		t.Errorf(`List(""): %d locks, %v; want 4 (the foreign key left out)`, len(got), err)
	}
	if _, err := l.List(context.Background(), string(make([]byte, MaxNameLen+1))); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a pattern too long: %v", err)
	}
	boom := errors.New("boom")
	l.Names = func(context.Context, string) ([]string, error) { return nil, boom }
	if _, err := l.List(context.Background(), "*"); !errors.Is(err, boom) {
		t.Errorf("a store error of Names: %v", err)
	}
	l = testListing(locks, &calls)
	l.InspectBatch = func(ctx context.Context, names []string) ([]lk, []error) {
		return make([]lk, len(names)), slices.Repeat([]error{boom}, len(names))
	}
	if _, err := l.List(context.Background(), "*"); !errors.Is(err, boom) {
		t.Errorf("an Inspect error: %v", err)
	}
	// Without InspectBatch, one Inspect call per name.
	l = testListing(locks, &calls)
	batch := l.InspectBatch
	l.InspectBatch, l.Batch = nil, 0
	var each atomic.Int32
	l.Inspect = func(ctx context.Context, name string) (lk, error) {
		each.Add(1)
		infos, errs := batch(ctx, []string{name})
		return infos[0], errs[0]
	}
	if got, err := l.List(context.Background(), "a:*"); err != nil || len(got) != 3 || each.Load() != 4 {
		t.Errorf("one by one: %d locks, %d calls, %v; want 3 locks of 4 calls", len(got), each.Load(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := testListing(locks, &calls).List(ctx, "*"); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled ctx: %v", err)
	}
}
