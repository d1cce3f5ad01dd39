package measure

import (
	"math"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestJain(t *testing.T) {
	for _, tc := range []struct {
		counts []int64
		want   float64
	}{
		{[]int64{5, 5, 5, 5}, 1},
		{[]int64{8, 0, 0, 0}, 0.25}, // one worker got everything: 1/n
		{[]int64{1, 3}, 16.0 / 20},  // (1+3)² / (2·(1+9))
		{[]int64{0, 0}, 0},
		{nil, 0},
	} {
		if got := Jain(tc.counts); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("Jain(%v) = %v, want %v", tc.counts, got, tc.want)
		}
	}
}

func TestPercentileNearestRank(t *testing.T) {
	var ws []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose: Summarise sorts
		ws = append(ws, time.Duration(i)*time.Millisecond)
	}
	w := Summarise(ws)
	if w.P50 != 50*time.Millisecond || w.P99 != 99*time.Millisecond || w.Max != 100*time.Millisecond {
		t.Fatalf("Summarise(1..100 ms) = %+v, want p50 50ms, p99 99ms, max 100ms", w)
	}
	if got := Percentile([]time.Duration{7}, 0.99); got != 7 {
		t.Fatalf("Percentile of one sample = %v, want 7", got)
	}
	if got := (Summarise(nil)); got != (Waits{}) {
		t.Fatalf("Summarise(nil) = %+v, want zero", got)
	}
}

func TestMedian(t *testing.T) {
	xs := []float64{3, 1, 2}
	if got := Median(xs); got != 2 {
		t.Fatalf("Median(3,1,2) = %v, want 2", got)
	}
	if xs[0] != 3 {
		t.Fatal("Median modified its input")
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Fatalf("Median(4,1,3,2) = %v, want 2.5", got)
	}
}

// The slot must see an overlap when two holders are inside at once, and
// count a handoff only when the holder changes.
func TestSlotCountsOverlapsAndHandoffs(t *testing.T) {
	s := NewSlot()
	s.Enter(1)
	s.Exit()
	s.Enter(1) // same worker again: no handoff
	s.Exit()
	s.Enter(2) // handoff
	s.Enter(3) // overlap (and a handoff)
	s.Exit()
	s.Exit()
	entries, overlaps, handoffs := s.Counts()
	if entries != 4 || overlaps != 1 || handoffs != 2 {
		t.Fatalf("entries, overlaps, handoffs = %d, %d, %d; want 4, 1, 2", entries, overlaps, handoffs)
	}
	s.Reset()
	s.Enter(3) // the last holder survives Reset: no handoff
	s.Exit()
	if e, o, h := s.Counts(); e != 1 || o != 0 || h != 0 {
		t.Fatalf("after Reset: %d, %d, %d; want 1, 0, 0", e, o, h)
	}
}

// Without any lock, concurrent holders must be caught.
func TestSlotCatchesConcurrentHolders(t *testing.T) {
	s := NewSlot()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for range 50 {
				s.Enter(w)
				time.Sleep(100 * time.Microsecond)
				s.Exit()
			}
		}()
	}
	close(start)
	wg.Wait()
	if _, overlaps, _ := s.Counts(); overlaps == 0 {
		t.Fatal("8 unsynchronised holders produced no overlap")
	}
}

func TestCommandDeltaDropsHarnessCommands(t *testing.T) {
	before := map[string]int64{"evalsha": 10, "info": 5, "get": 3}
	after := map[string]int64{"evalsha": 14, "info": 9, "get": 3, "publish": 2, "flushall": 1, "config|resetstat": 1}
	d, total := CommandDelta(before, after)
	if total != 6 || d["evalsha"] != 4 || d["publish"] != 2 || len(d) != 2 {
		t.Fatalf("CommandDelta = %v, %d; want evalsha 4, publish 2, total 6", d, total)
	}
}
