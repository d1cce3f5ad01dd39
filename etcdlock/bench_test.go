package etcdlock

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/deadlinebench"
	"github.com/dlockgo/dlock/internal/etcdproc"
	"github.com/dlockgo/dlock/internal/proc"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// Benchmarks of etcdlock against etcd's own concurrency.Mutex on the same
// separate etcd process, once with fsync (etcd's default) and once with
// --unsafe-no-fsync. Run them one at a time:
//
//	go test -run '^$' -bench . -benchtime 1x ./etcdlock
//
// ETCDLOCK_BENCH_FSYNC and ETCDLOCK_BENCH_NOFSYNC, if set, are the client
// URLs of etcd servers of one's own to run against instead (so that two
// builds can be compared on the same servers, A B A B), and
// ETCDLOCK_BENCH_FSYNC_PID and ETCDLOCK_BENCH_NOFSYNC_PID their pids. Besides
// the rates, each run reports per acquire+release pair (or hand-off) the
// etcd requests (unary calls and streams opened), the allocations, the
// benchmark process's CPU time and, with the pids, the server's.

// locker is one worker's lock: etcdlock's Mutex or concurrency.Mutex.
type locker interface {
	lock(ctx context.Context) error
	unlock(ctx context.Context) error
}

type ours struct {
	m    *Mutex
	held func(context.Context) error
}

func (o *ours) lock(ctx context.Context) error {
	l, err := o.m.Acquire(ctx)
	if err == nil {
		o.held = l.Unlock
	}
	return err
}

func (o *ours) unlock(ctx context.Context) error { return o.held(ctx) }

type theirs struct{ m *concurrency.Mutex }

func (t theirs) lock(ctx context.Context) error   { return t.m.Lock(ctx) }
func (t theirs) unlock(ctx context.Context) error { return t.m.Unlock(ctx) }

// rpcs counts the requests of the etcd clients it is installed in.
type rpcs struct{ n atomic.Int64 }

func (r *rpcs) options() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			r.n.Add(1)
			return invoker(ctx, method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			r.n.Add(1)
			return streamer(ctx, desc, cc, method, opts...)
		}),
	}
}

// lockers makes n workers' lockers of lib on name, each on its own etcd
// client (and its own session), every request counted in count.
func lockers(b *testing.B, lib, endpoint, name string, n int, count *rpcs) []locker {
	out := make([]locker, n)
	for i := range out {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), DialOptions: count.options(),
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cli.Close() })
		switch lib {
		case "etcdlock":
			c, err := New(cli)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			out[i] = &ours{m: c.Mutex(name)}
		default:
			s, err := concurrency.NewSession(cli)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			out[i] = theirs{concurrency.NewMutex(s, "/bench/"+name)}
		}
	}
	return out
}

// benchPID returns the pid of the fs server the environment names (0:
// none named, or the benchmark started its own).
func benchPID(fs string) int {
	if os.Getenv("ETCDLOCK_BENCH_FSYNC") == "" {
		return 0
	}
	pid, _ := strconv.Atoi(os.Getenv("ETCDLOCK_BENCH_" + strings.ToUpper(fs) + "_PID"))
	return pid
}

// servers returns the shared member (fsync on) and one started with
// --unsafe-no-fsync, or the servers the environment names.
func servers(b *testing.B) map[string]string {
	if fs, nofs := os.Getenv("ETCDLOCK_BENCH_FSYNC"), os.Getenv("ETCDLOCK_BENCH_NOFSYNC"); fs != "" && nofs != "" {
		return map[string]string{"fsync": fs, "nofsync": nofs}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nofsync, err := etcdproc.Start(ctx, etcdproc.Options{NoFsync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nofsync.Close() })
	return map[string]string{"fsync": server.Endpoints()[0], "nofsync": nofsync.Endpoints()[0]}
}

// libs are the two libraries compared, in the order of each round.
var libs = []string{"etcdlock", "concurrency"}

// tally is one library's figures over the rounds of a benchmark.
type tally struct {
	count   rpcs
	times   []time.Duration // pairs (uncontended) or waits (hot key)
	ops     int             // pairs or hand-offs
	elapsed time.Duration
	mallocs uint64
	rpcs    int64
	cpu     time.Duration // the process's CPU time (user + system) in the rounds
	server  time.Duration // the etcd server's, when its pid is known (serverPID)
	rates   []float64     // ops per second of each round
}

// serverPID is the pid of the etcd server the benchmark runs against, from
// ETCDLOCK_BENCH_FSYNC_PID or ETCDLOCK_BENCH_NOFSYNC_PID (0: unknown).
var serverPID int

// procCPU returns the CPU time (user + system) process pid has used (0 if
// pid is 0 or its /proc entry cannot be read).
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	d, _ := proc.CPU(pid)
	return d
}

// cpuTime returns the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// round runs f for d and adds what it did to t.
func (t *tally) round(d time.Duration, f func(d time.Duration) (times []time.Duration)) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	n0 := t.count.n.Load()
	cpu0, srv0 := cpuTime(), procCPU(serverPID)
	start := time.Now()
	times := f(d)
	t.elapsed += time.Since(start)
	t.cpu += cpuTime() - cpu0
	t.server += procCPU(serverPID) - srv0
	runtime.ReadMemStats(&m1)
	t.times = append(t.times, times...)
	t.ops += len(times)
	t.rates = append(t.rates, float64(len(times))/d.Seconds())
	t.mallocs += m1.Mallocs - m0.Mallocs
	t.rpcs += t.count.n.Load() - n0
}

// rounds alternates the libraries in rounds of d, n times each, so that a
// shared machine's load falls on both alike; f runs one library's round.
func rounds(n int, d time.Duration, ts map[string]*tally, f func(lib string, d time.Duration) []time.Duration) {
	for i := range n {
		for j := range libs {
			lib := libs[(i+j)%len(libs)] // A B, B A, ...
			ts[lib].round(d, func(d time.Duration) []time.Duration { return f(lib, d) })
		}
	}
}

// pairedRatio returns the median over rounds of a's rate over b's in the
// same round pair: a load that drifts over the run falls out of it.
func pairedRatio(a, b *tally) float64 {
	var rs []float64
	for i := range min(len(a.rates), len(b.rates)) {
		if b.rates[i] > 0 {
			rs = append(rs, a.rates[i]/b.rates[i])
		}
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}

func quantile(ds []time.Duration, q float64) float64 {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return float64(ds[int(float64(len(ds)-1)*q)].Microseconds()) / 1000
}

// BenchmarkUncontended: one worker per library, acquire then release, as
// fast as it can, in 20 rounds of 200 ms per library, alternated; ratio
// is etcdlock's pairs/s over concurrency.Mutex's, paired-ratio the median
// of that ratio over the round pairs, p50-ratio concurrency.Mutex's median
// pair time over etcdlock's (above 1: etcdlock is faster).
func BenchmarkUncontended(b *testing.B) {
	for _, fs := range []string{"fsync", "nofsync"} {
		eps := servers(b)
		b.Run(fs, func(b *testing.B) {
			serverPID = benchPID(fs)
			ts := map[string]*tally{}
			ls := map[string]locker{}
			name := fmt.Sprintf("uncontended-%d", time.Now().UnixNano())
			ctx := context.Background()
			for _, lib := range libs {
				ts[lib] = &tally{}
				ls[lib] = lockers(b, lib, eps[fs], name, 1, &ts[lib].count)[0]
				if err := ls[lib].lock(ctx); err != nil { // warm up: the session
					b.Fatal(err)
				}
				_ = ls[lib].unlock(ctx)
			}
			rounds(20, 200*time.Millisecond, ts, func(lib string, d time.Duration) []time.Duration {
				l := ls[lib]
				var pairs []time.Duration
				for start := time.Now(); time.Since(start) < d; {
					t0 := time.Now()
					if err := l.lock(ctx); err != nil {
						b.Fatal(err)
					}
					if err := l.unlock(ctx); err != nil {
						b.Fatal(err)
					}
					pairs = append(pairs, time.Since(t0))
				}
				return pairs
			})
			for _, lib := range libs {
				t := ts[lib]
				b.ReportMetric(float64(t.ops)/t.elapsed.Seconds(), lib+"-pairs/s")
				b.ReportMetric(quantile(t.times, 0.5), lib+"-p50-ms")
				b.ReportMetric(quantile(t.times, 0.99), lib+"-p99-ms")
				b.ReportMetric(float64(t.rpcs)/float64(t.ops), lib+"-rpcs/pair")
				b.ReportMetric(float64(t.mallocs)/float64(t.ops), lib+"-allocs/pair")
				b.ReportMetric(float64(t.cpu.Microseconds())/float64(t.ops), lib+"-cpu-us/pair")
				if serverPID != 0 {
					b.ReportMetric(float64(t.server.Microseconds())/float64(t.ops), lib+"-server-cpu-us/pair")
				}
			}
			e, c := ts["etcdlock"], ts["concurrency"]
			b.ReportMetric(float64(e.ops)/e.elapsed.Seconds()/(float64(c.ops)/c.elapsed.Seconds()), "ratio")
			b.ReportMetric(pairedRatio(e, c), "paired-ratio")
			b.ReportMetric(quantile(c.times, 0.5)/quantile(e.times, 0.5), "p50-ratio")
		})
	}
}

// BenchmarkHotKey64: 64 workers per library, each on its own client, take
// one lock in turn, in 4 rounds of 1.25 s per library, alternated;
// hand-offs per second, the 99th percentile wait, Jain's fairness index
// over the workers' grant counts, and the ratio of etcdlock's hand-offs
// per second over concurrency.Mutex's.
func BenchmarkHotKey64(b *testing.B) {
	for _, fs := range []string{"fsync", "nofsync"} {
		eps := servers(b)
		b.Run(fs, func(b *testing.B) {
			serverPID = benchPID(fs)
			ts := map[string]*tally{}
			ls := map[string][]locker{}
			counts := map[string][]int{}
			name := fmt.Sprintf("hot-%d", time.Now().UnixNano())
			for _, lib := range libs {
				ts[lib] = &tally{}
				ls[lib] = lockers(b, lib, eps[fs], name, 64, &ts[lib].count)
				counts[lib] = make([]int, 64)
			}
			rounds(4, 1250*time.Millisecond, ts, func(lib string, d time.Duration) []time.Duration {
				ctx, cancel := context.WithTimeout(context.Background(), d)
				defer cancel()
				var mu sync.Mutex
				var waits []time.Duration
				var wg sync.WaitGroup
				for i, l := range ls[lib] {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for ctx.Err() == nil {
							t0 := time.Now()
							if err := l.lock(ctx); err != nil {
								return
							}
							w := time.Since(t0)
							_ = l.unlock(context.Background())
							mu.Lock()
							waits = append(waits, w)
							counts[lib][i]++
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				return waits
			})
			for _, lib := range libs {
				t := ts[lib]
				var sum, sq float64
				for _, n := range counts[lib] {
					sum += float64(n)
					sq += float64(n) * float64(n)
				}
				b.ReportMetric(float64(t.ops)/t.elapsed.Seconds(), lib+"-handoffs/s")
				if t.ops > 0 {
					b.ReportMetric(quantile(t.times, 0.99), lib+"-p99-wait-ms")
					b.ReportMetric(float64(t.rpcs)/float64(t.ops), lib+"-rpcs/handoff")
					b.ReportMetric(float64(t.cpu.Microseconds())/float64(t.ops), lib+"-cpu-us/handoff")
					if serverPID != 0 {
						b.ReportMetric(float64(t.server.Microseconds())/float64(t.ops), lib+"-server-cpu-us/handoff")
					}
				}
				if sq > 0 {
					b.ReportMetric(math.Round(sum*sum/(float64(len(counts[lib]))*sq)*1000)/1000, lib+"-jain")
				}
			}
			e, c := ts["etcdlock"], ts["concurrency"]
			if c.ops > 0 {
				b.ReportMetric(float64(e.ops)/e.elapsed.Seconds()/(float64(c.ops)/c.elapsed.Seconds()), "ratio")
				b.ReportMetric(pairedRatio(e, c), "paired-ratio")
			}
		})
	}
}

// BenchmarkAcquireDeadline: what a ctx deadline costs an Acquire of every
// shape (deadlinebench.Run: one goroutine, pairs alternating with and
// without a 5 s deadline), a fresh name per pair, on the tests' etcd
// member.
//
//	go test -run '^$' -bench AcquireDeadline -count 3 ./etcdlock
func BenchmarkAcquireDeadline(b *testing.B) {
	c := newClient(b)
	seq := 0 // a fresh name per pair, also across the sub-benchmarks' runs
	name := func(shape string) string {
		seq++
		return "deadline:" + shape + ":" + strconv.Itoa(seq)
	}
	deadlinebench.Run(b, []deadlinebench.Shape{
		{Name: "mutex", Locker: func(int) dlock.Locker { return c.Mutex(name("mutex")) }},
		{Name: "lock", Locker: func(int) dlock.Locker { return c.Lock(name("lock")) }},
		{Name: "read", Locker: func(int) dlock.Locker { return c.RWLock(name("read")).ReadLock() }},
		{Name: "write", Locker: func(int) dlock.Locker { return c.RWLock(name("write")).WriteLock() }},
		{Name: "semaphore", Locker: func(int) dlock.Locker { return c.Semaphore(name("semaphore"), 3) }},
		{Name: "multi", Locker: func(int) dlock.Locker { n := name("multi"); return c.MultiLock(n+":a", n+":b") }},
	})
}
