package zklock

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/zkproc"
	"github.com/go-zookeeper/zk"
)

// The benchmarks compare zklock with go-zookeeper's own zk.Lock recipe on
// a server of their own, with the transaction log's fsync on (as
// ZooKeeper ships) unless ZKLOCK_BENCH_FORCESYNC=no:
//
//	go test -run '^$' -bench . -benchtime 1x
//
// Uncontended: one client locks and unlocks one name in a loop (pairs/s).
// HotKey64: 64 sessions contend on one name for 5 s (hand-offs/s, p99 wait,
// Jain's fairness index over the sessions' acquisitions).

var bench struct {
	once sync.Once
	srv  *zkproc.Server
	err  error
}

func benchServer(b *testing.B) *zkproc.Server {
	bench.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		bench.srv, bench.err = zkproc.Start(ctx, zkproc.Options{ForceSync: os.Getenv("ZKLOCK_BENCH_FORCESYNC") != "no"})
	})
	if bench.err != nil {
		b.Fatal(bench.err)
	}
	return bench.srv
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

var benchLibs = []struct {
	name string
	open opener
}{{"zklock", openZklock}, {"zk.Lock", openRecipe}}

func BenchmarkUncontended(b *testing.B) {
	srv := benchServer(b)
	for _, lib := range benchLibs {
		b.Run(lib.name, func(b *testing.B) {
			l := lib.open(b, srv.Addr(), fmt.Sprintf("uncontended-%d", time.Now().UnixNano()), 1)[0]
			ctx := context.Background()
			var waits []time.Duration
			const window = 5 * time.Second
			b.ResetTimer()
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
			slices.Sort(waits)
			b.ReportMetric(float64(len(waits))/el.Seconds(), "pairs/s")
			b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "p50_pair_ms")
			b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99_pair_ms")
			b.ReportMetric(float64(waits[len(waits)-1].Microseconds())/1000, "max_pair_ms")
		})
	}
}

func BenchmarkHotKey64(b *testing.B) {
	srv := benchServer(b)
	for _, lib := range benchLibs {
		b.Run(lib.name, func(b *testing.B) {
			const clients = 64
			const window = 5 * time.Second
			ls := lib.open(b, srv.Addr(), fmt.Sprintf("hot-%d", time.Now().UnixNano()), clients)
			ctx := context.Background()
			var mu sync.Mutex
			var waits []time.Duration
			counts := make([]int, clients)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			end := start.Add(window)
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
						got := time.Now()
						if got.Before(end) {
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
			slices.Sort(waits)
			var sum, sq float64
			for _, c := range counts {
				sum += float64(c)
				sq += float64(c) * float64(c)
			}
			b.ReportMetric(float64(len(waits))/window.Seconds(), "handoffs/s")
			b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99_wait_ms")
			b.ReportMetric(sum*sum/(clients*sq), "jain")
		})
	}
}
