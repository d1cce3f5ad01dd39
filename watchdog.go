package dlock

import (
	"cmp"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"

	"github.com/redis/go-redis/v9"
)

// watchdog is the Client's one renewal loop: every timeout/3 it renews all
// watchdog-kept holds in pipelined batches, one round trip per batch. Holds
// whose ops are no renewer, such as a RedLock's, renew themselves through
// extend, each round in its own goroutine, given up to the whole timeout to
// confirm (a RedLock's quorum may be reached only when its slower node
// answers: a round that confirms late still renews from when it was sent),
// so rounds of one hold may overlap. A renewal that finds the lock gone or
// taken loses the hold at once; a failed renewal is retried next tick, and
// the hold's own deadline timer loses it if no renewal succeeds in time.
type watchdog struct {
	scripts  *scripter
	keeper   *seam.Keeper[*attempt]
	timeout  time.Duration // the lease of the holds it renews
	batch    int           // holds per pipeline
	interval time.Duration
	quit     chan struct{} // closed by stop
	done     chan struct{} // closed when run and its rounds have ended
	once     sync.Once

	// The self-renewing holds' rounds: ended by close, waited for by run.
	ownCtx    context.Context
	ownCancel context.CancelFunc
	own       sync.WaitGroup

	roundTrips atomic.Int64
}

func newWatchdog(s *scripter, k *seam.Keeper[*attempt], timeout time.Duration, batch int) *watchdog {
	w := &watchdog{
		scripts: s, keeper: k, timeout: timeout, batch: batch, interval: timeout / 3,
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	w.ownCtx, w.ownCancel = context.WithCancel(context.Background())
	go w.run()
	return w
}

// stop ends the loop: no round starts after it (the one in flight ends).
func (w *watchdog) stop() {
	w.once.Do(func() {
		close(w.quit)
		w.ownCancel()
	})
}

// wait waits until the loop and its rounds have ended, or ctx is done.
func (w *watchdog) wait(ctx context.Context) {
	select {
	case <-w.done:
	case <-ctx.Done():
	}
}

func (w *watchdog) run() {
	defer close(w.done)
	defer w.own.Wait()
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return
		case <-t.C:
			w.renewAll()
		}
	}
}

func (w *watchdog) renewAll() {
	var hs, own []*seam.Hold[*attempt]
	var calls [][]scriptCall // hs[i]'s renewal calls
	for _, h := range w.keeper.Renewing() {
		if c := h.Ops().ops.renewCalls(w.timeout); c != nil {
			hs, calls = append(hs, h), append(calls, c)
		} else {
			own = append(own, h)
		}
	}
	for _, h := range own {
		w.own.Add(1)
		go func() {
			defer w.own.Done()
			w.renewOwn(h)
		}()
	}
	for i := 0; i < len(hs); i += w.batch {
		j := min(i+w.batch, len(hs))
		w.renewBatch(hs[i:j], calls[i:j])
	}
}

// renewOwn renews a hold through its ops' extend, waiting for the answer
// up to the lease (the hold's deadline loses it first if none comes).
func (w *watchdog) renewOwn(h *seam.Hold[*attempt]) {
	ctx, cancel := context.WithTimeout(w.ownCtx, w.timeout)
	defer cancel()
	sent := time.Now()
	ok, err := h.Ops().Extend(ctx, w.timeout)
	if err == nil && !ok {
		err = errNotOurs
	}
	w.settle(h, sent, err)
}

// renewBatch renews hs in one pipeline (a second one only for calls whose
// script the server had lost).
func (w *watchdog) renewBatch(hs []*seam.Hold[*attempt], each [][]scriptCall) {
	ctx, cancel := context.WithTimeout(context.Background(), w.interval)
	defer cancel()
	var calls []scriptCall
	first := make([]int, len(hs)+1) // hs[i]'s calls are calls[first[i]:first[i+1]]
	for i := range hs {
		first[i] = len(calls)
		calls = append(calls, each[i]...)
	}
	first[len(hs)] = len(calls)
	sent := time.Now()
	cmds := w.scripts.pipelined(ctx, w.scripts.rdb.Pipeline, calls, nil)
	w.roundTrips.Add(1)
	for i, h := range hs {
		w.settle(h, sent, renewResult(cmds[first[i]:first[i+1]]))
	}
}

// renewResult is a hold's renewal outcome from its calls' replies: nil
// (every call returned 1), errNotOurs (one returned 0), or the first error.
func renewResult(cmds []*redis.Cmd) error {
	var first error
	for _, cmd := range cmds {
		n, err := cmd.Int64()
		switch {
		case err != nil:
			first = cmp.Or(first, err)
		case n != 1:
			return errNotOurs
		}
	}
	return first
}

func (w *watchdog) settle(h *seam.Hold[*attempt], sent time.Time, err error) {
	switch {
	case err == nil:
		h.Renewed(sent, w.timeout)
	case err == errNotOurs:
		h.Lose(observe.LostDeletedOrTaken)
	default:
		h.RenewFailed(err)
	}
}
