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
// README writes it), acquire and release timed apart; every shape, on a
// go-redis client with its default options and with
// ContextTimeoutEnabled, each with a ctx of 5 s deadline and with
// context.Background(). Reported: the acquire's and the release's p50 in µs
// and the client's CPU per pair; ns/op is the pair.
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
			for _, deadline := range []bool{true, false} {
				run := "nodeadline"
				if deadline {
					run = "deadline"
				}
				b.Run(opts+"/"+sh.name+"/"+run, func(b *testing.B) {
					acq := make([]time.Duration, 0, b.N)
					rel := make([]time.Duration, 0, b.N)
					prefix := "dl:" + opts + ":" + sh.name + ":" + run + ":" + strconv.Itoa(b.N) + ":"
					i := 0
					cpu := processCPU()
					for b.Loop() {
						i++
						ctx, cancel := context.Background(), context.CancelFunc(func() {})
						if deadline {
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
						acq, rel = append(acq, t1.Sub(t0)), append(rel, t2.Sub(t1))
					}
					reportCPU(b, cpu)
					b.ReportMetric(p50µs(acq), "acquire-p50-µs")
					b.ReportMetric(p50µs(rel), "release-p50-µs")
				})
			}
		}
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
