// Package deadlinebench measures what a ctx deadline costs an Acquire, on
// any backend: the benchmarks named BenchmarkAcquireDeadline beside the
// root package, etcdlock and zklock run it.
package deadlinebench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

// Shape is one lock shape of a backend: Locker returns the lock the i-th
// pair acquires and releases (a fresh name per pair, or the same).
type Shape struct {
	Name   string
	Locker func(i int) dlock.Locker
}

// Run runs a sub-benchmark per shape on one goroutine. Its pairs (Acquire,
// then Unlock) alternate: one under a ctx with a 5 s deadline, the next
// under context.Background(), so both sides are measured in the same
// moments of a noisy machine. Reported: each side's acquire and release
// p50 in µs, and the deadline's cost at p50 (deadline-cost-µs: the
// acquire p50 with a deadline minus without); ns/op is the pair.
func Run(b *testing.B, shapes []Shape) {
	for _, sh := range shapes {
		b.Run(sh.Name, func(b *testing.B) {
			var acq, rel [2][]time.Duration // [0]: with a deadline, [1]: without
			i := 0
			for b.Loop() {
				i++
				side := i % 2
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if side == 0 {
					ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
				}
				t0 := time.Now()
				l, err := sh.Locker(i).Acquire(ctx)
				t1 := time.Now()
				if err != nil {
					b.Fatal(err)
				}
				err = l.Unlock(ctx)
				t2 := time.Now()
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				acq[side], rel[side] = append(acq[side], t1.Sub(t0)), append(rel[side], t2.Sub(t1))
			}
			b.ReportMetric(p50µs(acq[0]), "acq-deadline-p50-µs")
			b.ReportMetric(p50µs(acq[1]), "acq-none-p50-µs")
			b.ReportMetric(p50µs(rel[0]), "rel-deadline-p50-µs")
			b.ReportMetric(p50µs(rel[1]), "rel-none-p50-µs")
			b.ReportMetric(p50µs(acq[0])-p50µs(acq[1]), "deadline-cost-µs")
		})
	}
}

// p50µs is the median of ds in µs.
func p50µs(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / float64(time.Microsecond)
}
