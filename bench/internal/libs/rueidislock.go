package libs

import (
	"time"

	"context"
	"errors"
	"fmt"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"
)

// Rueidislock returns rueidislock's rows, with KeyMajority 1 as its README
// prescribes for a single Redis node. Each client is one Locker (one rueidis
// client: a single auto-pipelined connection with client-side caching, whose
// invalidations wake waiters).
//
//	defaults: KeyValidity 5 s extended every 2.5 s, NoLoopTracking off
//	fast:     NoLoopTracking on (the README's setting for Redis >= 7.0.5)
//
// With Env.Lease set (long holds) both use KeyValidity = Lease, extended
// every Lease/3: the cadence every library gets there.
func Rueidislock() []Entry {
	return []Entry{
		{Lib: "rueidislock", Variant: "defaults", Setting: "KeyMajority 1, KeyValidity 5 s", Client: "rueidis",
			Open: func(_ context.Context, env Env, clients int) (Instance, error) {
				return openRueidislock(env, clients, false)
			}},
		{Lib: "rueidislock", Variant: "fast", Setting: "KeyMajority 1, NoLoopTracking", Client: "rueidis",
			Open: func(_ context.Context, env Env, clients int) (Instance, error) {
				return openRueidislock(env, clients, true)
			}},
	}
}

type rueidisInst struct {
	ls  []rueidislock.Locker
	env Env
}

func openRueidislock(env Env, clients int, noloop bool) (Instance, error) {
	r := &rueidisInst{env: env}
	for range clients {
		opt := rueidislock.LockerOption{
			ClientOption:   rueidis.ClientOption{InitAddress: []string{env.Redis[0]}},
			KeyMajority:    1,
			NoLoopTracking: noloop,
		}
		if env.Lease > 0 {
			opt.KeyValidity, opt.ExtendInterval = env.Lease, env.Lease/3
		}
		l, err := rueidislock.NewLocker(opt)
		if err != nil {
			r.Close()
			return nil, err
		}
		r.ls = append(r.ls, l)
	}
	return r, nil
}

func (r *rueidisInst) Worker(i int, name string) (Worker, error) {
	return &rueidisWorker{l: r.ls[i%len(r.ls)], name: name, env: r.env}, nil
}

func (r *rueidisInst) Close() error {
	for _, l := range r.ls {
		l.Close()
	}
	return nil
}

type rueidisWorker struct {
	l      rueidislock.Locker
	name   string
	env    Env
	held   context.Context
	cancel context.CancelFunc
}

// Lock waits for the lock. The lock is a context derived from the one given
// to WithContext and is released when that context ends, so the wait is
// bounded by cancelling a context of our own (after Env.Wait, or when ctx
// ends), which is stopped once the lock is ours.
func (w *rueidisWorker) Lock(ctx context.Context) error {
	wctx, cancel := context.WithCancelCause(context.Background())
	stopRun := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	timer := time.AfterFunc(w.env.Wait, func() { cancel(ErrWaitTimeout) })
	held, release, err := w.l.WithContext(wctx, w.name)
	// Both must be stopped before the lock is safe to use: if either has
	// fired, the lock context is (being) cancelled.
	timerStopped, runStopped := timer.Stop(), stopRun()
	if err != nil {
		cancel(nil)
		if c := context.Cause(wctx); c != nil && !errors.Is(c, context.Canceled) {
			return c
		}
		return err
	}
	if !timerStopped || !runStopped {
		release()
		cancel(nil)
		return fmt.Errorf("rueidislock: %w", context.Cause(wctx))
	}
	w.held = held
	w.cancel = func() { release(); cancel(nil) }
	return nil
}

func (w *rueidisWorker) Unlock(context.Context) error {
	lost := w.held.Err() != nil
	w.cancel()
	w.held, w.cancel = nil, nil
	if lost {
		return ErrLost
	}
	return nil
}

func (w *rueidisWorker) Lost() bool { return w.held != nil && w.held.Err() != nil }
