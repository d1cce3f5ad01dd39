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
			got, err := Collect(context.Background(), names(100), workers, func(ctx context.Context, name string) (string, bool, error) {
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
	got, err := Collect(context.Background(), nil, 16, func(context.Context, string) (int, bool, error) {
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
	got, err := Collect(context.Background(), names(1000), 4, func(ctx context.Context, name string) (int, bool, error) {
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
	got, err := Collect(ctx, names(100), 4, func(ictx context.Context, name string) (int, bool, error) {
		if name == "n0" { // among the first 4: the others wait for the end
			cancel()
		}
		<-ictx.Done()
		return 0, false, fmt.Errorf("inspect %s: %w", name, ictx.Err())
	})
	if !errors.Is(err, context.Canceled) || got != nil {
		t.Fatalf("Collect = %v, %v; want context.Canceled", got, err)
	}
	if _, err := Collect(ctx, nil, 4, func(context.Context, string) (int, bool, error) { return 0, false, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("Collect(ended ctx, no names) = %v, want context.Canceled", err)
	}
}

func TestSortOldest(t *testing.T) {
	type holder struct{ since time.Time }
	type info struct {
		name    string
		holders []holder
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(secs ...int) []holder {
		var hs []holder
		for _, s := range secs {
			h := holder{}
			if s >= 0 {
				h.since = t0.Add(time.Duration(s) * time.Second)
			}
			hs = append(hs, h)
		}
		return hs
	}
	infos := []info{
		{"unknown:b", at(-1)},
		{"new", at(9)},
		{"none", nil},
		{"readers", at(7, 2, -1)}, // its earliest known holder: 2
		{"tie:b", at(5)},
		{"unknown:a", at(-1, -1)},
		{"tie:a", at(5)},
		{"old", at(1)},
	}
	SortOldest(infos, func(i info) []holder { return i.holders }, func(h holder) time.Time { return h.since }, func(i info) string { return i.name })
	var got []string
	for _, i := range infos {
		got = append(got, i.name)
	}
	want := []string{"old", "readers", "tie:a", "tie:b", "new", "none", "unknown:a", "unknown:b"}
	if !slices.Equal(got, want) {
		t.Fatalf("SortOldest: %v, want %v", got, want)
	}
}
