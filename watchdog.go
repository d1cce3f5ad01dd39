package dlock

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// renewer is a hold's ops that the watchdog can renew in a pipeline.
type renewer interface {
	renewCall(ttl time.Duration) scriptCall
}

// watchdog is the Client's one renewal loop: every timeout/3 it renews all
// watchdog-kept holds in pipelined batches, one round trip per batch. A
// renewal that finds the lock gone or taken loses the hold at once; a failed
// renewal is retried next tick, and the hold's own deadline timer loses it if
// no renewal succeeds in time.
type watchdog struct {
	c        *Client
	interval time.Duration
	stop     chan struct{}
	done     chan struct{}

	mu    sync.Mutex
	holds map[*hold]struct{}

	roundTrips atomic.Int64
}

func newWatchdog(c *Client) *watchdog {
	w := &watchdog{
		c: c, interval: c.timeout / 3,
		stop: make(chan struct{}), done: make(chan struct{}),
		holds: make(map[*hold]struct{}),
	}
	go w.run()
	return w
}

func (w *watchdog) add(h *hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.stop:
	default:
		w.holds[h] = struct{}{}
	}
}

func (w *watchdog) remove(h *hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.holds, h)
}

func (w *watchdog) close() {
	w.mu.Lock()
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.mu.Unlock()
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
	w.mu.Lock()
	hs := make([]*hold, 0, len(w.holds))
	for h := range w.holds {
		hs = append(hs, h)
	}
	w.mu.Unlock()
	for i := 0; i < len(hs); i += w.c.batch {
		w.renewBatch(hs[i:min(i+w.c.batch, len(hs))])
	}
}

func (w *watchdog) renewBatch(hs []*hold) {
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
		again := make([]*hold, len(idx))
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
// errNotOurs, or the error.
func (w *watchdog) exec(ctx context.Context, hs []*hold, eval bool) []error {
	p := w.c.rdb.Pipeline()
	cmds := make([]interface{ Int64() (int64, error) }, len(hs))
	for i, h := range hs {
		cmds[i] = h.ops.(renewer).renewCall(w.c.timeout).queue(ctx, p, eval)
	}
	_, _ = p.Exec(ctx) // errors are per command
	w.roundTrips.Add(1)
	errs := make([]error, len(hs))
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		switch {
		case err != nil:
			errs[i] = err
		case n != 1:
			errs[i] = errNotOurs
		}
	}
	return errs
}

func (w *watchdog) settle(h *hold, sent time.Time, err error) {
	switch {
	case err == nil:
		h.extended(sent, w.c.timeout, true)
		h.mu.Lock()
		n := h.renewals
		h.mu.Unlock()
		w.c.observer.ObserveRenewal(RenewalEvent{Shape: h.shape, Name: h.name, OK: true, Held: time.Since(h.since), Renewals: n})
	case err == errNotOurs:
		h.lose(LostDeletedOrTaken)
	default:
		w.c.observer.ObserveRenewal(RenewalEvent{Shape: h.shape, Name: h.name, Held: time.Since(h.since), Err: err})
		if w.c.logger != nil {
			w.c.logger.Debug("dlock: renewal failed", "shape", h.shape, "name", h.name, "err", err)
		}
	}
}
