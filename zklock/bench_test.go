package zklock

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/deadlinebench"
	"github.com/dlockgo/dlock/internal/proc"
	"github.com/dlockgo/dlock/internal/zkproc"
	"github.com/go-zookeeper/zk"
)

// The benchmarks compare zklock with go-zookeeper's own zk.Lock recipe on
// one server, with the transaction log's fsync on (as ZooKeeper ships)
// unless ZKLOCK_BENCH_FORCESYNC=no, or on the server at
// ZKLOCK_BENCH_ADDR (so that runs of two builds share one server), each
// for 5 s or ZKLOCK_BENCH_WINDOW:
//
//	go test -run '^$' -bench . -benchtime 1x -count 3
//
// (-count repeats each sub-benchmark before the next; to interleave, run
// the binary once per round, with ZKLOCK_BENCH_ORDER=reverse every other
// time.)
//
// Uncontended: one client locks and unlocks one name in a loop for 5 s:
// pairs/s, the pair's latency, and per pair the requests the server
// received (mntr's zk_packets_received: pings included), the client's CPU
// time and its heap allocations.
//
// HotKey64: 64 sessions contend on one name for 5 s, after a warm-up of a
// fifth of that (hand-offs/s, p99 wait, Jain's fairness index over the sessions'
// acquisitions, requests per hand-off, the client's CPU per hand-off and,
// on the benchmark's own server, the server's).

var bench struct {
	once sync.Once
	srv  *zkproc.Server
	addr string
	err  error
}

func benchAddr(b *testing.B) string {
	bench.once.Do(func() {
		if bench.addr = os.Getenv("ZKLOCK_BENCH_ADDR"); bench.addr != "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		bench.srv, bench.err = zkproc.Start(ctx, zkproc.Options{ForceSync: os.Getenv("ZKLOCK_BENCH_FORCESYNC") != "no"})
		if bench.err == nil {
			bench.addr = bench.srv.Addr()
		}
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.addr
}

// benchWindow is how long each benchmark runs: ZKLOCK_BENCH_WINDOW, or 5 s.
func benchWindow() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("ZKLOCK_BENCH_WINDOW")); err == nil && d > 0 {
		return d
	}
	return 5 * time.Second
}

// packets returns how many requests the server at addr has received.
func packets(b testing.TB, addr string) int64 {
	out, err := zkproc.FourLetter(context.Background(), addr, "mntr")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_packets_received\t"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("mntr has no zk_packets_received: %q", out)
	return 0
}

// serverCPU is the CPU time the benchmark's own ZooKeeper server has used
// (0 when it runs on ZKLOCK_BENCH_ADDR's, or /proc cannot be read).
func serverCPU() time.Duration {
	if bench.srv == nil {
		return 0
	}
	d, _ := proc.CPU(bench.srv.PID())
	return d
}

// usage is the process's CPU time and heap allocations so far.
type usage struct {
	cpu    time.Duration
	allocs uint64
}

func now() usage {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{cpu: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), allocs: ms.Mallocs}
}

// benchLock is one session's lock on one name, of either library.
type benchLock interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

type zklockBench struct {
	c    *Client
	name string
	l    interface{ Unlock(context.Context) error }
}

func (z *zklockBench) lock(ctx context.Context) error {
	l, err := z.c.Mutex(z.name).Acquire(ctx)
	z.l = l
	return err
}
func (z *zklockBench) unlock(ctx context.Context) error { return z.l.Unlock(ctx) }

type recipeBench struct{ l *zk.Lock }

func (r *recipeBench) lock(context.Context) error   { return r.l.Lock() }
func (r *recipeBench) unlock(context.Context) error { return r.l.Unlock() }

// opener returns n locks on name, each in a session of its own.
type opener func(b *testing.B, addr, name string, n int) []benchLock

func openZklock(b *testing.B, addr, name string, n int) []benchLock {
	out := make([]benchLock, n)
	for i := range out {
		out[i] = &zklockBench{c: dialAddr(b, addr, 10*time.Second), name: name}
	}
	return out
}

func openRecipe(b *testing.B, addr, name string, n int) []benchLock {
	out := make([]benchLock, n)
	for i := range out {
		conn, _, err := zk.Connect([]string{addr}, 10*time.Second, zk.WithLogInfo(false))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(conn.Close)
		out[i] = &recipeBench{l: zk.NewLock(conn, "/zkrecipe/"+name, zk.WorldACL(zk.PermAll))}
	}
	return out
}

type benchLib struct {
	name string
	open opener
}

// benchLibs returns the libraries compared, zklock first unless
// ZKLOCK_BENCH_ORDER=reverse (runs that alternate the order cancel what
// going first or second costs).
func benchLibs() []benchLib {
	libs := []benchLib{{"zklock", openZklock}, {"zk.Lock", openRecipe}}
	if os.Getenv("ZKLOCK_BENCH_ORDER") == "reverse" {
		slices.Reverse(libs)
	}
	return libs
}

func BenchmarkUncontended(b *testing.B) {
	addr := benchAddr(b)
	for _, lib := range benchLibs() {
		b.Run(lib.name, func(b *testing.B) {
			l := lib.open(b, addr, fmt.Sprintf("uncontended-%d", time.Now().UnixNano()), 1)[0]
			ctx := context.Background()
			// One pair first: the directories exist, the connection is warm.
			if err := l.lock(ctx); err != nil {
				b.Fatal(err)
			}
			if err := l.unlock(ctx); err != nil {
				b.Fatal(err)
			}
			var waits []time.Duration
			window := benchWindow()
			b.ResetTimer()
			p0, u0 := packets(b, addr), now()
			start := time.Now()
			for time.Since(start) < window {
				t0 := time.Now()
				if err := l.lock(ctx); err != nil {
					b.Fatal(err)
				}
				if err := l.unlock(ctx); err != nil {
					b.Fatal(err)
				}
				waits = append(waits, time.Since(t0))
			}
			el := time.Since(start)
			u1, p1 := now(), packets(b, addr)
			n := float64(len(waits))
			slices.Sort(waits)
			b.ReportMetric(n/el.Seconds(), "pairs/s")
			b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "p50_pair_ms")
			b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99_pair_ms")
			b.ReportMetric(float64(p1-p0-1)/n, "reqs/pair") // -1: the first mntr
			b.ReportMetric(float64((u1.cpu-u0.cpu).Microseconds())/n, "cpu_us/pair")
			b.ReportMetric(float64(u1.allocs-u0.allocs)/n, "allocs/pair")
		})
	}
}

func BenchmarkHotKey64(b *testing.B) {
	addr := benchAddr(b)
	for _, lib := range benchLibs() {
		b.Run(lib.name, func(b *testing.B) {
			const clients = 64
			window := benchWindow()
			ls := lib.open(b, addr, fmt.Sprintf("hot-%d", time.Now().UnixNano()), clients)
			// A warm-up, not measured: each session's first Acquire (and the
			// server's first seconds, for the library that runs first) would
			// otherwise fill the 99th percentile.
			contend(b, ls, window/5)
			b.ResetTimer()
			p0, u0, s0 := packets(b, addr), now(), serverCPU()
			waits, counts := contend(b, ls, window)
			u1, p1, s1 := now(), packets(b, addr), serverCPU()
			slices.Sort(waits)
			var sum, sq float64
			for _, c := range counts {
				sum += float64(c)
				sq += float64(c) * float64(c)
			}
			n := float64(len(waits))
			b.ReportMetric(n/window.Seconds(), "handoffs/s")
			b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99_wait_ms")
			b.ReportMetric(sum*sum/(clients*sq), "jain")
			b.ReportMetric(float64(p1-p0-1)/n, "reqs/handoff")
			b.ReportMetric(float64((u1.cpu-u0.cpu).Microseconds())/n, "cpu_us/handoff")
			if s0 > 0 {
				b.ReportMetric(float64((s1-s0).Microseconds())/n, "srv_cpu_us/handoff")
			}
		})
	}
}

// contend has every lock in ls taken in turn, as fast as each can, for d:
// each acquisition's wait, and the acquisitions per lock.
func contend(b *testing.B, ls []benchLock, d time.Duration) ([]time.Duration, []int) {
	ctx := context.Background()
	var mu sync.Mutex
	var waits []time.Duration
	counts := make([]int, len(ls))
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				t0 := time.Now()
				if err := l.lock(ctx); err != nil {
					b.Error(err)
					return
				}
				if got := time.Now(); got.Before(end) {
					mu.Lock()
					waits = append(waits, got.Sub(t0))
					counts[i]++
					mu.Unlock()
				}
				if err := l.unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return waits, counts
}

// BenchmarkAcquireDeadline: what a ctx deadline costs an Acquire of every
// shape (deadlinebench.Run: one goroutine, pairs alternating with and
// without a 5 s deadline), one name per shape (a fresh name would add the
// creation of its directory to every pair).
//
//	go test -run '^$' -bench AcquireDeadline -count 3 ./zklock
func BenchmarkAcquireDeadline(b *testing.B) {
	c := dialAddr(b, benchAddr(b), 10*time.Second)
	n := fmt.Sprintf("deadline-%d", time.Now().UnixNano())
	shapes := []deadlinebench.Shape{
		{Name: "mutex", Locker: func(int) dlock.Locker { return c.Mutex(n + ".mutex") }},
		{Name: "lock", Locker: func(int) dlock.Locker { return c.Lock(n + ".lock") }},
		{Name: "read", Locker: func(int) dlock.Locker { return c.RWLock(n + ".rw").ReadLock() }},
		{Name: "write", Locker: func(int) dlock.Locker { return c.RWLock(n + ".rw").WriteLock() }},
		{Name: "semaphore", Locker: func(int) dlock.Locker { return c.Semaphore(n+".sem", 3) }},
		{Name: "multi", Locker: func(int) dlock.Locker { return c.MultiLock(n+".a", n+".b") }},
	}
	for _, sh := range shapes { // the directories exist, the connection is warm
		l, err := sh.Locker(0).Acquire(context.Background())
		if err == nil {
			err = l.Unlock(context.Background())
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	deadlinebench.Run(b, shapes)
}
