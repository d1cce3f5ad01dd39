package libs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
)

// Dlock returns dlock's rows: each lock shape with the library's defaults
// (no LeaseTime: the watchdog keeps the lease, 30 s renewed every 10 s;
// contended, waiters queue in Redis and a release hands the lock to the
// first of them, by a message on its Client's own channel).
func Dlock() []Entry {
	return []Entry{
		dlockEntry("Mutex", "defaults (watchdog lease, queue hand-off)", func(c *dlock.Client, name string) dlock.Locker { return c.Mutex(name) }),
		dlockEntry("Lock", "reentrant, defaults (same queue)", func(c *dlock.Client, name string) dlock.Locker { return c.Lock(name) }),
		dlockEntry("FairLock", "strict FIFO (same queue), defaults", func(c *dlock.Client, name string) dlock.Locker { return c.FairLock(name) }),
	}
}

func dlockEntry(variant, setting string, shape func(*dlock.Client, string) dlock.Locker) Entry {
	return Entry{Lib: "dlock", Variant: variant, Setting: setting, Client: "go-redis",
		Open: func(_ context.Context, env Env, clients int) (Instance, error) {
			return openDlock(env, clients, shape)
		}}
}

type dlockInst struct {
	rdbs  []*redis.Client
	cs    []*dlock.Client
	shape func(*dlock.Client, string) dlock.Locker
	wait  time.Duration
}

func openDlock(env Env, clients int, shape func(*dlock.Client, string) dlock.Locker) (Instance, error) {
	d := &dlockInst{rdbs: goRedisClients(env.Redis[0], clients), shape: shape, wait: env.Wait}
	cfg := dlock.Config{TTL: env.Lease}
	for _, rdb := range d.rdbs {
		c, err := dlock.New(rdb, cfg)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.cs = append(d.cs, c)
	}
	return d, nil
}

func (d *dlockInst) Worker(i int, name string) (Worker, error) {
	return &leaseWorker{lk: d.shape(d.cs[i%len(d.cs)], name), wait: d.wait}, nil
}

// RenewalRoundTrips sums the watchdogs' renewal pipelines.
func (d *dlockInst) RenewalRoundTrips() int64 {
	var n int64
	for _, c := range d.cs {
		n += c.Stats().RenewalRoundTrips
	}
	return n
}

func (d *dlockInst) Close() error {
	var errs []error
	for _, c := range d.cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(append(errs, closeGoRedis(d.rdbs))...)
}

// leaseWorker is a worker of one of this project's Lockers (every
// backend), called as the README tells users to: a ctx with a deadline (a
// request's; here the wait budget and a second more) and Wait(budget). A
// wait that runs out is ErrWaitTimeout.
type leaseWorker struct {
	lk   dlock.Locker
	wait time.Duration
	l    *dlock.Lease
}

func (w *leaseWorker) Lock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, w.wait+time.Second)
	defer cancel()
	l, err := w.lk.Acquire(ctx, dlock.Wait(w.wait))
	if errors.Is(err, dlock.ErrNotAcquired) {
		return ErrWaitTimeout
	}
	if err != nil {
		return err
	}
	w.l = l
	return nil
}

func (w *leaseWorker) Unlock(ctx context.Context) error {
	if w.l == nil {
		return fmt.Errorf("libs: %s: unlock without lock", w.lk.Name())
	}
	l := w.l
	w.l = nil
	err := l.Unlock(ctx)
	if errors.Is(err, dlock.ErrLockLost) {
		return fmt.Errorf("%w: %w", ErrLost, err)
	}
	return err
}

// Lost reports whether the held lease was lost.
func (w *leaseWorker) Lost() bool { return w.l != nil && w.l.Err() != nil }

// DlockRedLock returns dlock's RedLock row over every node of env.Redis
// (one dlock Client per node; defaults: random 20–200 ms between attempts).
func DlockRedLock() []Entry {
	return []Entry{{Lib: "dlock", Variant: "RedLock", Setting: "5 Clients, defaults (local wake-up, else 20–200 ms)", Client: "go-redis",
		Open: func(_ context.Context, env Env, clients int) (Instance, error) {
			return openDlockRedLock(env, clients)
		}}}
}

// dlockRedLockInst is clients sets of one dlock Client per node.
type dlockRedLockInst struct {
	rdbs []*redis.Client
	sets [][]*dlock.Client
	wait time.Duration
}

func openDlockRedLock(env Env, clients int) (Instance, error) {
	d := &dlockRedLockInst{wait: env.Wait}
	cfg := dlock.Config{TTL: env.Lease}
	for range clients {
		var set []*dlock.Client
		for _, a := range env.Redis {
			rdb := redis.NewClient(&redis.Options{Addr: a})
			d.rdbs = append(d.rdbs, rdb)
			c, err := dlock.New(rdb, cfg)
			if err != nil {
				d.Close()
				return nil, err
			}
			set = append(set, c)
		}
		d.sets = append(d.sets, set)
	}
	return d, nil
}

func (d *dlockRedLockInst) Worker(i int, name string) (Worker, error) {
	return &leaseWorker{lk: dlock.NewRedLock(name, d.sets[i%len(d.sets)]...), wait: d.wait}, nil
}

func (d *dlockRedLockInst) Close() error {
	var errs []error
	for _, set := range d.sets {
		for _, c := range set {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(append(errs, closeGoRedis(d.rdbs))...)
}
