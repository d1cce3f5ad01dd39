package etcdlock

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/etcdproc"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Benchmarks of etcdlock against etcd's own concurrency.Mutex on the same
// separate etcd process, once with fsync (etcd's default) and once with
// --unsafe-no-fsync. Run them one at a time:
//
//	go test -run '^$' -bench . -benchtime 1x ./etcdlock

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

// lockers makes n workers' lockers of lib on name, each on its own etcd
// client (and its own session).
func lockers(b *testing.B, lib, endpoint, name string, n int) []locker {
	out := make([]locker, n)
	for i := range out {
		cli := etcdClient(b, endpoint)
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

// servers returns the shared member (fsync on) and one started with
// --unsafe-no-fsync.
func servers(b *testing.B) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nofsync, err := etcdproc.Start(ctx, etcdproc.Options{NoFsync: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nofsync.Close() })
	return map[string]string{"fsync": server.Endpoints()[0], "nofsync": nofsync.Endpoints()[0]}
}

// BenchmarkUncontended: one worker, acquire then release, as fast as it
// can, for 3 s per library.
func BenchmarkUncontended(b *testing.B) {
	for _, fs := range []string{"fsync", "nofsync"} {
		eps := servers(b)
		for _, lib := range []string{"etcdlock", "concurrency"} {
			b.Run(fs+"/"+lib, func(b *testing.B) {
				l := lockers(b, lib, eps[fs], fmt.Sprintf("uncontended-%d", time.Now().UnixNano()), 1)[0]
				ctx := context.Background()
				if err := l.lock(ctx); err != nil { // warm up: the session
					b.Fatal(err)
				}
				_ = l.unlock(ctx)
				var pairs []time.Duration
				start := time.Now()
				for time.Since(start) < 3*time.Second {
					t0 := time.Now()
					if err := l.lock(ctx); err != nil {
						b.Fatal(err)
					}
					if err := l.unlock(ctx); err != nil {
						b.Fatal(err)
					}
					pairs = append(pairs, time.Since(t0))
				}
				el := time.Since(start)
				slices.Sort(pairs)
				b.ReportMetric(float64(len(pairs))/el.Seconds(), "pairs/s")
				b.ReportMetric(float64(pairs[len(pairs)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(pairs[len(pairs)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}

// BenchmarkHotKey64: 64 workers, each on its own client, take one lock in
// turn for 5 s; hand-offs per second, the 99th percentile wait and Jain's
// fairness index over the workers' grant counts.
func BenchmarkHotKey64(b *testing.B) {
	for _, fs := range []string{"fsync", "nofsync"} {
		eps := servers(b)
		for _, lib := range []string{"etcdlock", "concurrency"} {
			b.Run(fs+"/"+lib, func(b *testing.B) {
				ls := lockers(b, lib, eps[fs], fmt.Sprintf("hot-%d", time.Now().UnixNano()), 64)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var mu sync.Mutex
				var waits []time.Duration
				counts := make([]int, len(ls))
				var wg sync.WaitGroup
				start := time.Now()
				for i, l := range ls {
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
							counts[i]++
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				el := time.Since(start)
				slices.Sort(waits)
				var sum, sq float64
				for _, n := range counts {
					sum += float64(n)
					sq += float64(n) * float64(n)
				}
				b.ReportMetric(float64(len(waits))/el.Seconds(), "handoffs/s")
				if len(waits) > 0 {
					b.ReportMetric(float64(waits[len(waits)*99/100].Microseconds())/1000, "p99-wait-ms")
				}
				b.ReportMetric(math.Round(sum*sum/(float64(len(counts))*sq)*1000)/1000, "jain")
			})
		}
	}
}
