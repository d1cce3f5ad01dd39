package dlock_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// familyShapes are the benchmarked shapes, in report order.
var familyShapes = []string{"fair", "rw_read", "rw_write", "multi", "redlock", "semaphore"}

// familyLocker returns the Locker of shape on name for one contender: cs are
// its Clients, one per RedLock node (cs[0] for the other shapes).
func familyLocker(shape, name string, cs []*dlock.Client) dlock.Locker {
	c := cs[0]
	switch shape {
	case "fair":
		return c.FairLock(name)
	case "rw_read":
		return c.RWLock(name).ReadLock()
	case "rw_write":
		return c.RWLock(name).WriteLock()
	case "multi":
		return c.MultiLock(name+":a", name+":b")
	case "redlock":
		return dlock.NewRedLock(name, cs...)
	case "semaphore":
		return c.Semaphore(name, 8)
	}
	panic("unknown shape " + shape)
}

// sent counts the commands clients send: every command a go-redis client
// processes (pipelined ones included) through the hook, plus SUBSCRIBE and
// UNSUBSCRIBE from the servers' commandstats (pub/sub connections bypass the
// hooks; INFO commandstats would also count the commands scripts run inside).
type sent struct{ n atomic.Int64 }

func (s *sent) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *sent) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "info" {
			s.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (s *sent) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// total returns the commands sent so far.
func (s *sent) total(b *testing.B, rdbs []*redis.Client) int64 {
	n := s.n.Load()
	for _, rdb := range rdbs {
		info, err := rdb.Info(context.Background(), "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			for _, cmd := range []string{"cmdstat_subscribe:calls=", "cmdstat_unsubscribe:calls="} {
				if rest, ok := strings.CutPrefix(line, cmd); ok {
					v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
					n += v
				}
			}
		}
	}
	return n
}

// familyNodes starts the 5 masters of the benchmarks (a RedLock uses all of
// them, the other shapes the first) and returns a go-redis client on each,
// counting what it sends in s.
func familyNodes(b *testing.B, s *sent) []*redis.Client {
	rdbs := make([]*redis.Client, 5)
	for i, srv := range redistest.StartMasters(b, 5) {
		rdbs[i] = redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 128})
		rdbs[i].AddHook(s)
		b.Cleanup(func() { rdbs[i].Close() })
	}
	return rdbs
}

// contenderClients returns one dlock Client per node for each of n
// contenders.
func contenderClients(b *testing.B, rdbs []*redis.Client, n int) [][]*dlock.Client {
	out := make([][]*dlock.Client, n)
	for i := range out {
		for _, rdb := range rdbs {
			out[i] = append(out[i], newClient(b, rdb))
		}
	}
	return out
}

// Uncontended acquire+release of each family shape, one goroutine (Wait(0):
// the lock is always free). cmds/op counts the commands sent to Redis.
func BenchmarkFamilyUncontended(b *testing.B) {
	var s sent
	rdbs := familyNodes(b, &s)
	cs := contenderClients(b, rdbs, 1)[0]
	ctx := context.Background()
	for _, shape := range familyShapes {
		b.Run(shape, func(b *testing.B) {
			lk := familyLocker(shape, "u-"+shape, cs)
			before := s.total(b, rdbs)
			b.ResetTimer()
			for b.Loop() {
				l, err := lk.Acquire(ctx, dlock.Wait(0))
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(s.total(b, rdbs)-before)/float64(b.N), "cmds/op")
		})
	}
}

// 64 contenders, each on its own Clients (its own pub/sub connection), on
// one hot name per shape: b.N acquisitions in all. Reports acquisitions/s,
// wait percentiles and commands sent to Redis per acquisition (waiting,
// refreshing and pub/sub included). A semaphore has 8 permits; readers share.
func BenchmarkFamilyContended64(b *testing.B) {
	const contenders = 64
	var s sent
	rdbs := familyNodes(b, &s)
	cs := contenderClients(b, rdbs, contenders)
	for _, shape := range familyShapes {
		b.Run(shape, func(b *testing.B) {
			name := "hot-" + shape + "-" + strconv.Itoa(b.N)
			lks := make([]dlock.Locker, contenders)
			for w := range lks {
				lks[w] = familyLocker(shape, name, cs[w])
			}
			before := s.total(b, rdbs)
			r := driveContended(b, contenders, func(w int, _ int64) dlock.Locker { return lks[w] })
			r.report(b, false)
			if len(r.waits) > 0 {
				b.ReportMetric(float64(s.total(b, rdbs)-before)/float64(len(r.waits)), "cmds/acq")
			}
		})
	}
}
