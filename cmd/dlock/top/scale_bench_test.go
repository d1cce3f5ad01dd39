package top

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	dl "github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
)

// envInt reads a benchmark's size from the environment.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n >= 0 {
		return n
	}
	return def
}

// redisCPU returns the server's CPU time so far (user + sys).
func redisCPU(b *testing.B, rdb *redis.Client) time.Duration {
	s, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(s, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "used_cpu_sys" || k == "used_cpu_user" {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// source is what the view reads c through, as dlock top does: a Lister,
// or with DLOCK_TOP_SOURCE=list the Client's List (which reads every lock
// whole each time: the figures before the Lister).
func source(c *dl.Client) Source {
	if os.Getenv("DLOCK_TOP_SOURCE") == "list" {
		return c
	}
	return c.NewLister()
}

// flashSale holds DLOCK_TOP_HELD locks (default 10 000, a 10-minute lease
// each) and queues DLOCK_TOP_WAITERS waiters (default 0) behind the first
// of them, ten per lock, on a fresh redis-server; it returns the server's
// client and the Client the view reads with.
func flashSale(b *testing.B) (*redis.Client, *dl.Client) {
	srv := redistest.Start(b)
	rdb := redistest.Client(b, srv)
	rdb.Options().PoolSize = 64
	c, err := dl.New(rdb, dl.Config{Label: "sale"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	held, waiters := envInt("DLOCK_TOP_HELD", 10_000), envInt("DLOCK_TOP_WAITERS", 0)
	ctx := context.Background()
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g := range 32 {
		wg.Go(func() {
			for i := g; i < held; i += 32 {
				if _, err := c.Mutex(fmt.Sprintf("sku:%d", i)).Acquire(ctx, dl.LeaseTime(10*time.Minute)); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		b.Fatalf("%d of %d locks not held", failed.Load(), held)
	}
	wctx, stop := context.WithCancel(ctx)
	b.Cleanup(stop)
	for i := range waiters {
		go func() { _, _ = c.Mutex(fmt.Sprintf("sku:%d", i/10)).Acquire(wctx) }()
	}
	if waiters > 0 {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			info, err := c.Inspect(ctx, fmt.Sprintf("sku:%d", (waiters-1)/10))
			if err == nil && len(info.Queue) == (waiters-1)%10+1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return rdb, c
}

// One reading of the view during a flash sale: how long it takes and what
// it costs Redis, after a first reading (reported on its own: it reads
// every lock whole).
//
//	cd cmd/dlock && DLOCK_TOP_HELD=10000 DLOCK_TOP_WAITERS=0 go test -run '^$' -bench TopReading -benchtime 10x ./top/
func BenchmarkTopReading(b *testing.B) {
	rdb, c := flashSale(b)
	w := NewWatcher(source(c), Options{Every: time.Second, Timeout: time.Minute})
	cpu0 := redisCPU(b, rdb)
	first := time.Now()
	w.Read(context.Background()) // the first reading reads every lock whole
	firstTook, firstCPU := time.Since(first), redisCPU(b, rdb)-cpu0
	cpu0 = redisCPU(b, rdb)
	b.ResetTimer()
	for range b.N {
		w.Read(context.Background())
	}
	b.StopTimer()
	v := w.View(Filter{}, nil)
	if !v.Reachable {
		b.Fatal(v.Error)
	}
	waiting := 0
	for _, l := range v.Locks {
		waiting += len(l.Waiters)
	}
	if os.Getenv("DLOCK_TOP_STATS") != "" {
		st, _ := rdb.Info(context.Background(), "commandstats").Result()
		_ = os.WriteFile(os.Getenv("DLOCK_TOP_STATS"), []byte(st), 0o644)
	}
	b.ReportMetric(float64(firstTook.Milliseconds()), "first-reading-ms")
	b.ReportMetric(float64(firstCPU.Milliseconds()), "first-redis-cpu-ms")
	b.ReportMetric(float64(len(v.Locks)), "locks")
	b.ReportMetric(float64(waiting), "waiters")
	b.ReportMetric(float64((redisCPU(b, rdb)-cpu0).Milliseconds())/float64(b.N), "redis-cpu-ms/reading")
}

// TestMain runs, when DLOCK_TOP_VIEW names a Redis address, a view of it
// instead of the tests: BenchmarkTopBeside's view, in a process of its own
// as dlock top is.
func TestMain(m *testing.M) {
	if addr := os.Getenv("DLOCK_TOP_VIEW"); addr != "" {
		os.Exit(runView(addr))
	}
	os.Exit(m.Run())
}

// runView reads the Redis at addr every DLOCK_TOP_EVERY_MS (default 1 s)
// as dlock top does, says "ready" on stdout after its first reading, and
// runs until it is killed.
func runView(addr string) int {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	c, err := dl.New(rdb, dl.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	every := time.Duration(envInt("DLOCK_TOP_EVERY_MS", 1000)) * time.Millisecond
	w := NewWatcher(source(c), Options{Every: every, Timeout: time.Minute})
	w.Read(context.Background())
	if v := w.View(Filter{}, nil); !v.Reachable {
		fmt.Fprintln(os.Stderr, v.Error)
		return 1
	}
	fmt.Println("ready")
	w.Run(context.Background())
	return 0
}

// processCPU returns the CPU time the process pid has used (user +
// system, from /proc).
func processCPU(b *testing.B, pid int) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // clock ticks of 10 ms
}

// startView starts the view of rdb's server in a process of its own (this
// test binary, see TestMain) and returns it once it has read once; it is
// killed at cleanup.
func startView(b *testing.B, rdb *redis.Client) *os.Process {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "DLOCK_TOP_VIEW="+rdb.Options().Addr)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		b.Fatalf("the view did not start: %q, %v", line, err)
	}
	return cmd.Process
}

// The lock service beside the view: 64 goroutines acquire and release a
// Mutex on one of 10 000 names (the bench's many-names load, on one
// Client) during a flash sale, in rounds of DLOCK_TOP_ROUND_MS (default
// 3 s) with the view reading every DLOCK_TOP_EVERY_MS (default 1 s) and
// without it (its process stopped, SIGSTOP), alternating. The view is one
// process for all rounds, as one dlock top runs through a sale, its first
// reading before them. It reports each side's pairs/s over all rounds and
// their ratio.
//
//	cd cmd/dlock && go test -run '^$' -bench TopBeside -benchtime 6x ./top/
func BenchmarkTopBeside(b *testing.B) {
	rdb, c := flashSale(b)
	round := time.Duration(envInt("DLOCK_TOP_ROUND_MS", 3000)) * time.Millisecond
	view := startView(b, rdb)
	var pairs [2]int64
	var spent, serverCPU [2]time.Duration
	viewCPU0 := processCPU(b, view.Pid)
	b.ResetTimer()
	for i := range b.N {
		viewed := i%2 == 1
		sig := syscall.SIGSTOP
		if viewed {
			sig = syscall.SIGCONT
		}
		if err := view.Signal(sig); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), round)
		var n atomic.Int64
		var wg sync.WaitGroup
		start, cpu0 := time.Now(), redisCPU(b, rdb)
		for range 64 {
			wg.Go(func() {
				for ctx.Err() == nil {
					l, err := c.Mutex("load:"+strconv.Itoa(rand.IntN(10_000))).Acquire(ctx, dl.Wait(3*time.Second))
					if err != nil {
						continue
					}
					if l.Unlock(context.Background()) == nil {
						n.Add(1)
					}
				}
			})
		}
		wg.Wait()
		cancel()
		k := 0
		if viewed {
			k = 1
		}
		pairs[k] += n.Load()
		spent[k] += time.Since(start)
		serverCPU[k] += redisCPU(b, rdb) - cpu0
	}
	b.StopTimer()
	_ = view.Signal(syscall.SIGCONT)
	b.ReportMetric(serverCPU[0].Seconds()/spent[0].Seconds(), "redis-cpu-alone")
	b.ReportMetric(serverCPU[1].Seconds()/spent[1].Seconds(), "redis-cpu-viewed")
	b.ReportMetric((processCPU(b, view.Pid)-viewCPU0).Seconds()/spent[1].Seconds(), "view-cpu")
	without, with := float64(pairs[0])/spent[0].Seconds(), float64(pairs[1])/spent[1].Seconds()
	b.ReportMetric(without, "pairs/s-alone")
	b.ReportMetric(with, "pairs/s-viewed")
	if without > 0 {
		b.ReportMetric(with/without, "viewed/alone")
	}
}
