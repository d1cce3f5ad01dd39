package dlock_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The physical floor of an uncontended acquire+release is two round trips:
// BenchmarkPingPing measures two PINGs on the same client in the same run.
func BenchmarkPingPing(b *testing.B) {
	rdb := redistest.Client(b, redistest.Start(b))
	ctx := context.Background()
	b.ResetTimer()
	cpu := processCPU()
	for b.Loop() {
		rdb.Ping(ctx)
		rdb.Ping(ctx)
	}
	reportCPU(b, cpu)
}

// processCPU is the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process CPU time per iteration since since (the
// client's CPU: redis-server is another process) as cpu-µs/op.
func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(processCPU()-since)/float64(time.Microsecond)/float64(b.N), "cpu-µs/op")
}

// Uncontended acquire+release, one goroutine; cpu-µs/op is the client's CPU
// per pair.
func BenchmarkUncontended(b *testing.B) {
	rdb := redistest.Client(b, redistest.Start(b))
	c := newClient(b, rdb)
	ctx := context.Background()
	for _, shape := range []string{"mutex", "lock", "fair"} {
		b.Run(shape, func(b *testing.B) {
			lk := map[string]dlock.Locker{"mutex": c.Mutex("u-mutex"), "lock": c.Lock("u-lock"), "fair": c.FairLock("u-fair")}[shape]
			cpu := processCPU()
			for b.Loop() {
				l, err := lk.Acquire(ctx, dlock.Wait(0))
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// Fresh names, the way the README writes it: a Locker made per acquisition
// (c.Mutex(name)) on a name never used before (a lock per order id), one
// goroutine; cpu-µs/op is the client's CPU per pair.
func BenchmarkFreshNames(b *testing.B) {
	rdb := redistest.Client(b, redistest.Start(b))
	c := newClient(b, rdb)
	ctx := context.Background()
	for _, shape := range []string{"mutex", "lock"} {
		b.Run(shape, func(b *testing.B) {
			i := 0
			cpu := processCPU()
			for b.Loop() {
				i++
				name := "order:" + shape + ":" + strconv.Itoa(i)
				var lk dlock.Locker
				if shape == "mutex" {
					lk = c.Mutex(name)
				} else {
					lk = c.Lock(name)
				}
				l, err := lk.Acquire(ctx, dlock.Wait(0))
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// What fresh names leave behind: after b.N acquire + release pairs on names
// never used before (an order id each), Redis keeps only the fence
// counters of the hash slots those names fell in: at most 16384 keys, no
// TTL, however many names. Reported: Redis memory per name (used_memory
// before and after: it falls as b.N grows) and the keys left.
// go test -run '^$' -bench FenceCounters -benchtime 1000000x: a million
// orders.
func BenchmarkFenceCounters(b *testing.B) {
	rdb := redistest.Client(b, redistest.Start(b))
	c := newClient(b, rdb)
	ctx := context.Background()
	before := usedMemory(b, rdb)
	var next atomic.Int64
	b.SetParallelism(32) // one Client shared by many goroutines, as a service uses it
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l, err := c.Mutex("order:"+strconv.FormatInt(next.Add(1), 10)).Acquire(ctx, dlock.Wait(0))
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	keys, err := rdb.DBSize(ctx).Result()
	if err != nil || keys > 16384 || keys > next.Load() {
		b.Fatalf("%d keys after %d fresh names (want at most one fence counter per hash slot): %v", keys, next.Load(), err)
	}
	b.ReportMetric(float64(usedMemory(b, rdb)-before)/float64(next.Load()), "redis-B/name")
	b.ReportMetric(float64(keys), "keys")
}

// usedMemory is the server's used_memory.
func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}

// contention is what driveContended measured.
type contention struct {
	waits    []time.Duration // sorted
	handoffs int             // grants to a worker other than the previous holder of that name
	seconds  float64
}

// driveContended runs b.N acquisitions spread over workers goroutines;
// locker(w, i) is worker w's lock for acquisition i (its name decides which
// holder a grant hands off from). It stops the timer when done.
func driveContended(b *testing.B, workers int, locker func(w int, i int64) dlock.Locker) contention {
	ctx := context.Background()
	var next atomic.Int64
	var mu sync.Mutex
	last := make(map[string]int)
	var res contention
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			my := make([]time.Duration, 0, b.N/workers+1)
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				lk := locker(w, i)
				t0 := time.Now()
				l, err := lk.Acquire(ctx, dlock.Wait(time.Minute))
				if err != nil {
					b.Error(err)
					return
				}
				my = append(my, time.Since(t0))
				mu.Lock()
				if prev, ok := last[lk.Name()]; ok && prev != w {
					res.handoffs++
				}
				last[lk.Name()] = w
				mu.Unlock()
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
			mu.Lock()
			res.waits = append(res.waits, my...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.seconds = time.Since(start).Seconds()
	b.StopTimer()
	slices.Sort(res.waits)
	return res
}

// report adds acquisitions/s, wait p50/p99 and (withHandoffs) handoffs/s.
func (r contention) report(b *testing.B, withHandoffs bool) {
	if len(r.waits) == 0 {
		return
	}
	b.ReportMetric(float64(len(r.waits))/r.seconds, "acq/s")
	if withHandoffs {
		b.ReportMetric(float64(r.handoffs)/r.seconds, "handoffs/s")
	}
	b.ReportMetric(ms(r.waits[len(r.waits)/2]), "p50-ms")
	b.ReportMetric(ms(r.waits[len(r.waits)*99/100]), "p99-ms")
}

// contended: 64 goroutines on one Client, names drawn from names.
func contended(b *testing.B, shape string, workers, names int) {
	c := newClient(b, redistest.Client(b, redistest.Start(b)))
	driveContended(b, workers, func(_ int, i int64) dlock.Locker {
		return lockers(c, "h:"+strconv.Itoa(int(i)%names))[shape]
	}).report(b, true)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// 64 goroutines on one hot name.
func BenchmarkHotKey64(b *testing.B) {
	for _, shape := range []string{"mutex", "lock"} {
		b.Run(shape, func(b *testing.B) { contended(b, shape, 64, 1) })
	}
}

// 64 goroutines on 10 000 names.
func BenchmarkSpread64(b *testing.B) {
	for _, shape := range []string{"mutex", "lock"} {
		b.Run(shape, func(b *testing.B) { contended(b, shape, 64, 10000) })
	}
}

// Release-to-acquire latency of a waiter woken by pub/sub (lease 30 s, so the
// TTL cannot be what wakes it).
func BenchmarkHandoffLatency(b *testing.B) {
	rdb := redistest.Client(b, redistest.Start(b))
	a, w := newClient(b, rdb), newClient(b, rdb)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		l, err := a.Mutex("handoff").Acquire(ctx, dlock.LeaseTime(30*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			lw, err := w.Mutex("handoff").Acquire(ctx, dlock.Wait(10*time.Second))
			if err != nil {
				b.Error(err)
				got <- time.Time{}
				return
			}
			got <- time.Now()
			_ = lw.Unlock(ctx)
		}()
		// let the waiter try once and subscribe
		for n, _ := rdb.PubSubChannels(ctx, "dlock:{handoff}:wake:*").Result(); len(n) == 0; n, _ = rdb.PubSubChannels(ctx, "dlock:{handoff}:wake:*").Result() {
			time.Sleep(100 * time.Microsecond)
		}
		time.Sleep(time.Millisecond)
		released := time.Now()
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-got).Sub(released))
	}
	slices.Sort(lat)
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}

// The watchdog renews 10 000 held leases in ceil(N/batch) round trips a tick.
func BenchmarkWatchdog10k(b *testing.B) {
	const n = 10000
	rdb := redistest.Client(b, redistest.Start(b))
	c := newClient(b, rdb, dlock.Config{TTL: 3 * time.Second})
	ctx := context.Background()
	leases := make([]*dlock.Lease, n)
	for i := range leases {
		l, err := c.Mutex("wd:"+strconv.Itoa(i)).Acquire(ctx, dlock.Wait(0))
		if err != nil {
			b.Fatal(err)
		}
		leases[i] = l
	}
	b.ResetTimer()
	r0 := c.Stats().RenewalRoundTrips
	t0 := time.Now()
	for b.Loop() {
		time.Sleep(time.Second) // one tick
	}
	ticks := time.Since(t0).Seconds()
	b.ReportMetric(float64(c.Stats().RenewalRoundTrips-r0)/ticks, "roundtrips/tick")
	b.ReportMetric(float64(n), "leases")
	b.StopTimer()
	for _, l := range leases {
		_ = l.Unlock(ctx)
	}
}
