package dlock_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkAcquireDeadline: what a ctx deadline costs an Acquire. One
// goroutine, a fresh name per pair (c.Shape(name) per acquisition, as the
// README writes it); every shape, on a go-redis client with its default
// options and with ContextTimeoutEnabled. The pairs alternate: one under a
// ctx with a 5 s deadline, the next under context.Background(), so both
// are measured in the same moments of a noisy machine. Reported: each
// side's acquire and release p50 in µs, and the deadline's cost at p50
// (deadline-cost-µs: the acquire p50 with a deadline minus without); ns/op
// is the pair.
//
//	go test -run '^$' -bench AcquireDeadline -count 3 .
func BenchmarkAcquireDeadline(b *testing.B) {
	srv := redistest.Start(b)
	type shape struct {
		name string
		lk   func(c *dlock.Client, name string) dlock.Locker
	}
	shapes := []shape{
		{"mutex", func(c *dlock.Client, n string) dlock.Locker { return c.Mutex(n) }},
		{"lock", func(c *dlock.Client, n string) dlock.Locker { return c.Lock(n) }},
		{"fair", func(c *dlock.Client, n string) dlock.Locker { return c.FairLock(n) }},
		{"read", func(c *dlock.Client, n string) dlock.Locker { return c.RWLock(n).ReadLock() }},
		{"write", func(c *dlock.Client, n string) dlock.Locker { return c.RWLock(n).WriteLock() }},
		{"semaphore", func(c *dlock.Client, n string) dlock.Locker { return c.Semaphore(n, 3) }},
		{"multi", func(c *dlock.Client, n string) dlock.Locker { return c.MultiLock(n+":a", n+":b") }},
	}
	for _, opts := range []string{"defaults", "ctxtimeout"} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: opts == "ctxtimeout"})
		b.Cleanup(func() { _ = rdb.Close() })
		c := newClient(b, rdb)
		for _, sh := range shapes {
			b.Run(opts+"/"+sh.name, func(b *testing.B) {
				var acq, rel [2][]time.Duration // [0]: with a deadline, [1]: without
				prefix := "dl:" + opts + ":" + sh.name + ":" + strconv.Itoa(b.N) + ":"
				i := 0
				for b.Loop() {
					i++
					side := i % 2
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if side == 0 {
						ctx, cancel = context.WithTimeout(ctx, 5*time.Second)
					}
					t0 := time.Now()
					l, err := sh.lk(c, prefix+strconv.Itoa(i)).Acquire(ctx)
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
				reportDeadlineCost(b, acq, rel)
			})
		}
	}
}

// reportDeadlineCost reports the p50s of pairs with a deadline ([0]) and
// without ([1]), and the acquire's difference.
func reportDeadlineCost(b *testing.B, acq, rel [2][]time.Duration) {
	b.ReportMetric(p50µs(acq[0]), "acq-deadline-p50-µs")
	b.ReportMetric(p50µs(acq[1]), "acq-none-p50-µs")
	b.ReportMetric(p50µs(rel[0]), "rel-deadline-p50-µs")
	b.ReportMetric(p50µs(rel[1]), "rel-none-p50-µs")
	b.ReportMetric(p50µs(acq[0])-p50µs(acq[1]), "deadline-cost-µs")
}

// p50µs is the median of ds in µs.
func p50µs(ds []time.Duration) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[len(ds)/2]) / float64(time.Microsecond)
}
