package dlock_test

import (
	"strconv"
	"testing"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/deadlinebench"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkAcquireDeadline: what a ctx deadline costs an Acquire
// (deadlinebench.Run: pairs alternating with and without a 5 s deadline).
// One goroutine, a fresh name per pair (c.Shape(name) per acquisition, as
// the README writes it); every shape, on a go-redis client with its
// default options and with ContextTimeoutEnabled.
//
//	go test -run '^$' -bench AcquireDeadline -count 3 .
func BenchmarkAcquireDeadline(b *testing.B) {
	srv := redistest.Start(b)
	for _, opts := range []string{"defaults", "ctxtimeout"} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: opts == "ctxtimeout"})
		b.Cleanup(func() { _ = rdb.Close() })
		c := newClient(b, rdb)
		b.Run(opts, func(b *testing.B) {
			seq := 0 // a fresh name per pair, also across the sub-benchmarks' runs
			name := func(shape string) string {
				seq++
				return "dl:" + opts + ":" + shape + ":" + strconv.Itoa(seq)
			}
			deadlinebench.Run(b, []deadlinebench.Shape{
				{Name: "mutex", Locker: func(int) dlock.Locker { return c.Mutex(name("mutex")) }},
				{Name: "lock", Locker: func(int) dlock.Locker { return c.Lock(name("lock")) }},
				{Name: "fair", Locker: func(int) dlock.Locker { return c.FairLock(name("fair")) }},
				{Name: "read", Locker: func(int) dlock.Locker { return c.RWLock(name("read")).ReadLock() }},
				{Name: "write", Locker: func(int) dlock.Locker { return c.RWLock(name("write")).WriteLock() }},
				{Name: "semaphore", Locker: func(int) dlock.Locker { return c.Semaphore(name("semaphore"), 3) }},
				{Name: "multi", Locker: func(int) dlock.Locker { n := name("multi"); return c.MultiLock(n+":a", n+":b") }},
			})
		})
	}
}
