package libs

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// Redsync returns redsync's rows on one Redis node (a one-pool Redsync).
//
//	defaults: expiry 8 s, 32 tries, a random 50–250 ms delay between tries
//	fast:     1 ms between tries, as many tries as the wait allows
//
// redsync has no watchdog: with Env.Lease set the adapter renews each held
// mutex with Extend every Lease/3 from a goroutine of its own, as a redsync
// user has to write it.
func Redsync() []Entry {
	return []Entry{
		{Lib: "redsync", Variant: "defaults", Setting: "expiry 8 s, 32 tries, retry 50–250 ms", Client: "go-redis",
			Open: func(_ context.Context, env Env, clients int) (Instance, error) {
				return openRedsync(env, clients, false, env.Redis[:1])
			}},
		{Lib: "redsync", Variant: "fast", Setting: "retry every 1 ms until the wait runs out", Client: "go-redis",
			Open: func(_ context.Context, env Env, clients int) (Instance, error) {
				return openRedsync(env, clients, true, env.Redis[:1])
			}},
	}
}

// RedsyncRedLock returns redsync's rows on every node of env.Redis (one
// go-redis pool per node, quorum N/2+1).
func RedsyncRedLock() []Entry {
	return []Entry{
		{Lib: "redsync", Variant: "defaults", Setting: "5 pools, expiry 8 s, 32 tries, retry 50–250 ms", Client: "go-redis",
			Open: func(_ context.Context, env Env, clients int) (Instance, error) {
				return openRedsync(env, clients, false, env.Redis)
			}},
		{Lib: "redsync", Variant: "fast", Setting: "5 pools, retry every 1 ms", Client: "go-redis",
			Open: func(_ context.Context, env Env, clients int) (Instance, error) {
				return openRedsync(env, clients, true, env.Redis)
			}},
	}
}

type redsyncInst struct {
	rdbs  []*redis.Client
	rs    []*redsync.Redsync // one per client set
	opts  []redsync.Option
	wait  time.Duration
	renew time.Duration
}

func openRedsync(env Env, clients int, fast bool, addrs []string) (Instance, error) {
	r := &redsyncInst{wait: env.Wait}
	for range clients {
		var pools []redsyncredis.Pool
		for _, a := range addrs {
			rdb := redis.NewClient(&redis.Options{Addr: a})
			r.rdbs = append(r.rdbs, rdb)
			pools = append(pools, goredis.NewPool(rdb))
		}
		r.rs = append(r.rs, redsync.New(pools...))
	}
	if fast {
		r.opts = append(r.opts, redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(math.MaxInt32))
	}
	if env.Lease > 0 {
		r.opts = append(r.opts, redsync.WithExpiry(env.Lease))
		r.renew = env.Lease / 3
	}
	return r, nil
}

func (r *redsyncInst) Worker(i int, name string) (Worker, error) {
	// A redsync Mutex keeps the holder's value: one per worker.
	return &redsyncWorker{m: r.rs[i%len(r.rs)].NewMutex(name, r.opts...), wait: r.wait, renew: r.renew}, nil
}

func (r *redsyncInst) Close() error { return closeGoRedis(r.rdbs) }

type redsyncWorker struct {
	m     *redsync.Mutex
	wait  time.Duration
	renew time.Duration
	ren   *renewer
}

func (w *redsyncWorker) Lock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.wait)
	err := w.m.LockContext(ctx)
	cancel()
	if err != nil {
		return err
	}
	if w.renew > 0 {
		w.ren = startRenewer(w.renew, func(ctx context.Context) error {
			ok, err := w.m.ExtendContext(ctx)
			if err == nil && !ok {
				err = redsync.ErrExtendFailed
			}
			return err
		})
	}
	return nil
}

func (w *redsyncWorker) Unlock(ctx context.Context) error {
	lost := w.ren.stop()
	w.ren = nil
	ok, err := w.m.UnlockContext(ctx)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("redsync: unlock: %w", ErrLost)
	case lost != nil:
		return fmt.Errorf("%w: %w", ErrLost, lost)
	}
	return nil
}

func (w *redsyncWorker) Lost() bool { return w.ren.failed() }
