package suite

import (
	"math"
	"testing"
	"time"
)

// TestRoundRatios: each round's ratio is our row over the best peer of the
// same service measured in that round (floors and other services left
// out), with their median and range.
func TestRoundRatios(t *testing.T) {
	runs := func(acqs ...int64) []Measurement {
		var ms []Measurement
		for i, a := range acqs {
			ms = append(ms, Measurement{Round: i, Elapsed: time.Second, Acquisitions: a})
		}
		return ms
	}
	tab := &Table{Workers: 1, Rows: []*Row{
		{Lib: "dlock", Variant: "Mutex", Client: "go-redis", Runs: runs(100, 90, 120)},
		{Lib: "dlock", Variant: "Lock", Client: "go-redis", Runs: runs(10, 10, 10)},
		{Lib: "redsync", Variant: "fast", Client: "go-redis", Runs: runs(50, 100, 60)},
		{Lib: "rueidislock", Variant: "fast", Client: "rueidis", Runs: runs(80, 60, 100)},
		{Lib: "floor", Variant: "go-redis", Client: "go-redis", Floor: true, Runs: runs(1000, 1000, 1000)},
		{Lib: "dlock", Variant: "etcd Mutex", Client: "etcd", Runs: runs(30, 30, 30)},
		{Lib: "etcd", Variant: "Mutex", Client: "etcd", Runs: runs(20, 40, 30)},
		{Lib: "zklock", Variant: "Mutex", Client: zkClient, Runs: runs(5, 5, 5)},
	}}
	got := tab.roundRatios()
	want := []RoundRatio{
		{Service: "redis", Ours: "dlock Mutex", Rounds: []float64{1.25, 0.9, 1.2}, Median: 1.2, Min: 0.9, Max: 1.25},
		{Service: "etcd", Ours: "dlock etcd Mutex", Rounds: []float64{1.5, 0.75, 1}, Median: 1, Min: 0.75, Max: 1.5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d services %+v, want %d (zookeeper has no peer here)", len(got), got, len(want))
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for i, w := range want {
		g := got[i]
		if g.Service != w.Service || g.Ours != w.Ours || len(g.Rounds) != len(w.Rounds) || !near(g.Median, w.Median) || !near(g.Min, w.Min) || !near(g.Max, w.Max) {
			t.Fatalf("service %d = %+v, want %+v", i, g, w)
		}
		for k := range w.Rounds {
			if !near(g.Rounds[k], w.Rounds[k]) {
				t.Errorf("%s round %d = %v, want %v", w.Service, k, g.Rounds[k], w.Rounds[k])
			}
		}
	}
}
