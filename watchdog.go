package dlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// renewer is a hold's ops that the watchdog can renew in a pipeline: the hold
// is renewed when every call returns 1, and lost when any returns 0.
type renewer interface {
	renewCalls(ttl time.Duration) []scriptCall
}

// watchdog is the Client's one renewal loop: every timeout/3 it renews all
// watchdog-kept holds in pipelined batches, one round trip per batch (holds
// whose ops are no renewer, such as a RedLock's, renew themselves through
// extend, concurrently). A renewal that finds the lock gone or taken loses
// the hold at once; a failed renewal is retried next tick, and the hold's own
// deadline timer loses it if no renewal succeeds in time.
type watchdog struct {
	c        *Client
	interval time.Duration
	stop     chan struct{}
	done     chan struct{}
	once     sync.Once

	roundTrips atomic.Int64
}

func newWatchdog(c *Client) *watchdog {
	w := &watchdog{
		c: c, interval: c.timeout / 3,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	go w.run()
	return w
}

func (w *watchdog) close() {
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

func (w *watchdog) run() {
	defer close(w.done)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.renewAll()
		}
	}
}

func (w *watchdog) renewAll() {
	var hs, own []*Hold
	for _, h := range w.c.keeper.Renewing() {
		if _, ok := renewerOf(h); ok {
			hs = append(hs, h)
		} else {
			own = append(own, h)
		}
	}
	var wg sync.WaitGroup
	for _, h := range own {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.renewOwn(h)
		}()
	}
	for i := 0; i < len(hs); i += w.c.batch {
		w.renewBatch(hs[i:min(i+w.c.batch, len(hs))])
	}
	wg.Wait()
}

// renewOwn renews a hold through its ops' extend.
func (w *watchdog) renewOwn(h *Hold) {
	ctx, cancel := context.WithTimeout(context.Background(), w.interval)
	defer cancel()
	sent := time.Now()
	ok, err := h.Ops().Extend(ctx, w.c.timeout)
	if err == nil && !ok {
		err = errNotOurs
	}
	w.settle(h, sent, err)
}

func (w *watchdog) renewBatch(hs []*Hold) {
	ctx, cancel := context.WithTimeout(context.Background(), w.interval)
	defer cancel()
	sent := time.Now()
	errs := w.exec(ctx, hs, false)
	var idx []int // script cache flushed: those once more by EVAL
	for i, err := range errs {
		if isNoScript(err) {
			idx = append(idx, i)
		}
	}
	if len(idx) > 0 {
		again := make([]*Hold, len(idx))
		for k, i := range idx {
			again[k] = hs[i]
		}
		for k, err := range w.exec(ctx, again, true) {
			errs[idx[k]] = err
		}
	}
	for i, h := range hs {
		w.settle(h, sent, errs[i])
	}
}

// exec renews hs in one pipeline; the result holds, per hold, nil (renewed),
// errNotOurs (a call returned 0), or the first error.
func (w *watchdog) exec(ctx context.Context, hs []*Hold, eval bool) []error {
	p := w.c.rdb.Pipeline()
	cmds := make([][]*redis.Cmd, len(hs))
	for i, h := range hs {
		r, _ := renewerOf(h)
		for _, call := range r.renewCalls(w.c.timeout) {
			cmds[i] = append(cmds[i], call.queue(ctx, p, eval))
		}
	}
	_, _ = p.Exec(ctx) // errors are per command
	w.roundTrips.Add(1)
	errs := make([]error, len(hs))
	for i, hc := range cmds {
		for _, cmd := range hc {
			n, err := cmd.Int64()
			switch {
			case err != nil:
				if errs[i] == nil {
					errs[i] = err
				}
			case n != 1:
				errs[i] = errNotOurs
			}
			if errs[i] == errNotOurs {
				break
			}
		}
	}
	return errs
}

func (w *watchdog) settle(h *Hold, sent time.Time, err error) {
	switch {
	case err == nil:
		h.Renewed(sent, w.c.timeout)
	case err == errNotOurs:
		h.Lose(LostDeletedOrTaken)
	default:
		h.RenewFailed(err)
	}
}

// renewerOf returns h's Redis ops as a renewer, if they are one.
func renewerOf(h *Hold) (renewer, bool) {
	ro, ok := h.Ops().(redisOps)
	if !ok {
		return nil, false
	}
	r, ok := ro.o.(renewer)
	return r, ok
}
