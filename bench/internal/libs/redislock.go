package libs

import (
	"context"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

// bsmTTL is the lock TTL given to bsm/redislock, which has no default: the
// same 30 s lease dlock's watchdog uses.
const bsmTTL = 30 * time.Second

// Redislock returns bsm/redislock's rows. Its default retry strategy is
// NoRetry (Obtain fails at once when the lock is held), which cannot wait at
// all; "defaults" uses the README's retry example instead, LinearBackoff
// every 100 ms (without its 3-try cap: every library gets the same wait).
//
//	defaults: LinearBackoff(100 ms), TTL 30 s
//	fast:     LinearBackoff(1 ms), TTL 30 s
//
// redislock has no watchdog: with Env.Lease set the adapter calls Refresh
// every Lease/3 from a goroutine per held lock.
func Redislock() []Entry {
	return []Entry{
		{Lib: "bsm/redislock", Variant: "defaults", Setting: "LinearBackoff(100 ms) (README example), TTL 30 s", Client: "go-redis",
			Open: func(_ context.Context, env Env, clients int) (Instance, error) {
				return openRedislock(env, clients, 100*time.Millisecond)
			}},
		{Lib: "bsm/redislock", Variant: "fast", Setting: "LinearBackoff(1 ms), TTL 30 s", Client: "go-redis",
			Open: func(_ context.Context, env Env, clients int) (Instance, error) {
				return openRedislock(env, clients, time.Millisecond)
			}},
	}
}

type redislockInst struct {
	rdbs  []*redis.Client
	cs    []*redislock.Client
	opts  *redislock.Options
	ttl   time.Duration
	wait  time.Duration
	renew time.Duration
}

func openRedislock(env Env, clients int, backoff time.Duration) (Instance, error) {
	r := &redislockInst{
		rdbs: goRedisClients(env.Redis[0], clients),
		// LinearBackoff keeps no state, so one Options serves every call.
		opts: &redislock.Options{RetryStrategy: redislock.LinearBackoff(backoff)},
		ttl:  bsmTTL, wait: env.Wait,
	}
	if env.Lease > 0 {
		r.ttl, r.renew = env.Lease, env.Lease/3
	}
	for _, rdb := range r.rdbs {
		r.cs = append(r.cs, redislock.New(rdb))
	}
	return r, nil
}

func (r *redislockInst) Worker(i int, name string) (Worker, error) {
	return &redislockWorker{inst: r, c: r.cs[i%len(r.cs)], name: name}, nil
}

func (r *redislockInst) Close() error { return closeGoRedis(r.rdbs) }

type redislockWorker struct {
	inst *redislockInst
	c    *redislock.Client
	name string
	l    *redislock.Lock
	ren  *renewer
}

func (w *redislockWorker) Lock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.inst.wait)
	l, err := w.c.Obtain(ctx, w.name, w.inst.ttl, w.inst.opts)
	cancel()
	if err != nil {
		return err
	}
	w.l = l
	if w.inst.renew > 0 {
		ttl := w.inst.ttl
		w.ren = startRenewer(w.inst.renew, func(ctx context.Context) error { return l.Refresh(ctx, ttl, nil) })
	}
	return nil
}

func (w *redislockWorker) Unlock(ctx context.Context) error {
	lost := w.ren.stop()
	w.ren = nil
	l := w.l
	w.l = nil
	if err := l.Release(ctx); err != nil {
		return err
	}
	if lost != nil {
		return fmt.Errorf("%w: %w", ErrLost, lost)
	}
	return nil
}

func (w *redislockWorker) Lost() bool { return w.ren.failed() }
