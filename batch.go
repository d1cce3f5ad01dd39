package dlock

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// batcher sends the script calls that a Client's callers make at the same
// time in one pipeline: one write and one read for all of them, on the
// client and on the server, where each call alone would cost a round trip
// (a read and a write system call on each side). A call made while no other
// is in flight runs at once on its caller's goroutine, as it would without
// a batcher; calls made while others are in flight queue, and a flusher
// goroutine (at most maxFlights at once) sends what has queued as one
// pipeline — so a lone caller pays nothing and a busy Client sends ever
// fuller pipelines.
//
// A caller waits for its own reply only: it returns when its ctx ends,
// whatever the rest of its batch does. A call still queued is then taken
// out and never sent; a call already sent reports its reply to whoever
// waits on its done channel (the acquire loop gives a late grant back).
// Error replies are per call (WRONGTYPE fails its caller only); a lost
// connection fails the calls of that pipeline, which go-redis may resend:
// every script is idempotent (by holder token or operation id).
type batcher struct {
	s  *scripter
	bg context.Context // the Client's: ends with Close
	// spawn runs the flusher on a goroutine Close waits for; false if the
	// Client is closed.
	spawn func(func()) bool

	mu      sync.Mutex
	queue   []*batched
	flights int // calls or pipelines in flight, at most maxFlights
}

// maxFlights bounds the pipelines in flight at once: two, so that while
// Redis runs one the client reads the replies of the other and builds the
// next (one pipeline at a time leaves each side idle while the other
// works: 47 000 pairs/s against 55 000-59 000 with two or three, on 2
// cores, the Redis CPU per pair the same).
const maxFlights = 2

// maxBatch bounds the calls of one pipeline.
const maxBatch = 256

// batched is one queued call.
type batched struct {
	sc   scriptCall
	sent bool          // taken into a pipeline (under batcher.mu)
	cmd  *redis.Cmd    // the reply, once done is closed
	done chan struct{} // closed when cmd is set
}

// do runs sc and returns its reply. When ctx ends first, a call not sent
// yet is never sent, and do returns ctx.Err(); a call already sent is
// waited for, unless abandon is true: do then returns ctx.Err() and the
// call's batched entry, whose done closes once its reply (cmd) is in.
// inline allows the call to run on the caller's goroutine when nothing else
// is in flight (the client's own timeouts then bound it, not ctx).
func (b *batcher) do(ctx context.Context, sc scriptCall, inline, abandon bool) (*redis.Cmd, *batched, error) {
	b.mu.Lock()
	if b.flights == 0 && inline {
		b.flights++
		b.mu.Unlock()
		cmd := b.s.run(ctx, sc)
		b.next()
		return cmd, nil, nil
	}
	p := &batched{sc: sc, done: make(chan struct{})}
	b.queue = append(b.queue, p)
	start := b.flights < maxFlights
	if start {
		b.flights++
	}
	b.mu.Unlock()
	if start && !b.spawn(b.flush) {
		b.endFlight()
	}
	select {
	case <-p.done:
		return p.cmd, nil, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	sent := p.sent
	if !sent {
		if i := slices.Index(b.queue, p); i >= 0 {
			b.queue = slices.Delete(b.queue, i, i+1)
		}
	}
	b.mu.Unlock()
	if !sent {
		return nil, nil, ctx.Err()
	}
	if !abandon {
		<-p.done
		return p.cmd, nil, nil
	}
	select {
	case <-p.done: // answered meanwhile
		return p.cmd, nil, nil
	default:
		return nil, p, ctx.Err()
	}
}

// doInt is do for a script whose reply is an integer.
func (b *batcher) doInt(ctx context.Context, sc scriptCall) (int64, error) {
	b.mu.Lock()
	if b.flights == 0 {
		b.flights++
		b.mu.Unlock()
		n, err := b.s.runInt(ctx, sc)
		b.next()
		return n, err
	}
	b.mu.Unlock()
	cmd, _, err := b.do(ctx, sc, false, false)
	if err != nil {
		return 0, err
	}
	return cmd.Int64()
}

// next ends the call in flight: a flusher takes over what queued meanwhile.
func (b *batcher) next() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.flights--
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	if !b.spawn(b.flush) {
		b.endFlight()
	}
}

// flush sends what has queued, one pipeline at a time, until nothing is
// queued.
func (b *batcher) flush() {
	for {
		if b.bg.Err() != nil {
			b.endFlight()
			return
		}
		b.mu.Lock()
		n := min(len(b.queue), maxBatch)
		if n == 0 {
			b.flights--
			b.mu.Unlock()
			return
		}
		batch := slices.Clone(b.queue[:n])
		b.queue = slices.Delete(b.queue, 0, n)
		for _, p := range batch {
			p.sent = true
		}
		b.mu.Unlock()
		// Under the Client's context, not a caller's: a caller that gives
		// up does not end the calls of the others. One call alone goes as
		// itself, on the client's main pool (go-redis keeps another for
		// pipelines).
		if len(batch) == 1 {
			batch[0].cmd = b.closed(b.s.run(b.bg, batch[0].sc))
			close(batch[0].done)
			continue
		}
		calls := make([]scriptCall, len(batch))
		for i, p := range batch {
			calls[i] = p.sc
		}
		for i, cmd := range b.s.pipelined(b.bg, b.s.rdb.Pipeline, calls, nil) {
			batch[i].cmd = b.closed(cmd)
			close(batch[i].done)
		}
	}
}

// closed answers a call that Close cut with ErrClosed, as a queued call is
// (endFlight): a flusher's calls run under the Client's context, which
// Close cancels, and their callers are told that the Client closed, not
// that a context of theirs was cancelled.
func (b *batcher) closed(cmd *redis.Cmd) *redis.Cmd {
	if b.bg.Err() != nil && errors.Is(cmd.Err(), context.Canceled) {
		cmd.SetErr(ErrClosed)
	}
	return cmd
}

// endFlight ends a flight that cannot go on (the Client is closed): every
// queued call is answered with ErrClosed.
func (b *batcher) endFlight() {
	b.mu.Lock()
	batch := b.queue
	b.queue = nil
	b.flights--
	for _, p := range batch {
		p.sent = true
	}
	b.mu.Unlock()
	for _, p := range batch {
		p.cmd = redis.NewCmd(b.bg)
		p.cmd.SetErr(ErrClosed)
		close(p.done)
	}
}
