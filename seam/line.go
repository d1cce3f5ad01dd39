package seam

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Line is what a backend whose service keeps a lock's waiters in line
// (etcd's keys, ZooKeeper's sequential nodes, dlockfake's queue) does for
// one Acquire: its operations on the call's place P in that line. Queue
// runs them; the decisions (when to join again, when a try is refused,
// when the wait is over, which errors are tried again and how often, what
// Acquire returns) are Queue's.
type Line[P any] interface {
	// Join puts the call in line and returns its place; ok false when
	// nothing of it stays in line (its session ended first, say) and it
	// must join again, behind everyone.
	Join(ctx context.Context) (p P, ok bool, err error)
	// Look reads where p stands now (Behind, Granted, Gone).
	Look(ctx context.Context, p P) (Stand, error)
	// Wait returns once what Look last found in p's way may have moved
	// (Queue looks again), with gone true when p's place is lost, or with
	// ctx's error when ctx ends first.
	Wait(ctx context.Context, p P) (gone bool, err error)
	// Grant turns p, found Granted, into the call's Lease; with no Lease it
	// has given p up itself, and nil, nil says the grant came too late (p's
	// session ended meanwhile): Queue joins again.
	Grant(ctx context.Context, p P) (*Lease, error)
	// Leave gives p's place up: now, or in the background while the
	// service does not answer.
	Leave(p P)
	// Transient reports whether err, of the service, is worth another try
	// within the wait: no leader, a lost connection, a timeout inside the
	// cluster.
	Transient(err error) bool
}

// Stand is where a place stands in its line.
type Stand uint8

const (
	// Behind: something is in the place's way; Wait waits for it.
	Behind Stand = iota
	// Granted: nothing is in the place's way.
	Granted
	// Gone: the place is lost (its key or node deleted, its session
	// ended); Queue gives it up and joins again, behind everyone.
	Gone
)

// The pause between tries after a transient error: doubled after each,
// up to maxPause.
const (
	firstPause = 20 * time.Millisecond
	maxPause   = time.Second
)

// tryRejoins is how many times a try (Wait(0)) joins again after losing
// its place before it is refused.
const tryRejoins = 3

// errRefused: a try found the lock held.
var errRefused = errors.New("refused")

// WaitContext returns the context of a's requests to a lock service that
// keeps waiters in line: Store, ending at a's Until for a Wait, after try
// (a bound on one try against a service that does not answer) for a
// Wait(0), and when client ends (the client's Close; nil: the backend's
// requests watch its Close themselves, and without a Wait the context is
// Store). cancel releases it.
func (a *Acquisition) WaitContext(try time.Duration, client context.Context) (context.Context, context.CancelFunc) {
	var ctx context.Context
	var end context.CancelFunc
	switch {
	case a.Options.Wait > 0:
		ctx, end = context.WithDeadline(a.Store, a.Until())
	case a.Options.Wait == 0:
		ctx, end = context.WithTimeout(a.Store, try)
	case client == nil:
		return a.Store, func() {}
	default:
		ctx, end = context.WithCancel(a.Store)
	}
	if client == nil {
		return ctx, end
	}
	stop := context.AfterFunc(client, end)
	return ctx, func() { stop(); end() }
}

// Queue runs a's Acquire on a service that keeps waiters in line: join,
// look, wait for a wake-up, look again, until the place is granted (the
// Lease), the call is refused or its wait is over (ErrNotAcquired, naming
// the last transient error of the service, if any, as "(<service>:
// <error>)"), ctx's caller gives up (its ctx's error), or the client is
// closed (ErrClosed: closed reports it); the error is End's to name (an
// error of the line that names the call, Wrap, and says that outcome is
// returned as it is, with its detail). ctx is a's WaitContext, or a.Store
// for a line that ends the wait itself (its Look refusing once the wait
// ran out). A place that is lost joins again, behind everyone;
// a try (Wait(0)) is refused when it finds the lock held and does not
// wait. A transient error is tried again, after a pause, while the wait
// lasts; another ends the call. Every place that does not become the
// Lease is left.
func Queue[P any](ctx context.Context, a *Acquisition, line Line[P], closed func() bool, service string) (*Lease, error) {
	q := queue[P]{line: line, ctx: ctx, try: a.Options.Wait == 0, pause: firstPause}
	l, err := q.run()
	if err != nil {
		return nil, a.failed(ctx, err, q.last, closed, service)
	}
	return l, nil
}

func (a *Acquisition) failed(ctx context.Context, err, last error, closed func() bool, service string) error {
	switch {
	case a.Store.Err() != nil:
		return kept(err, a.Store.Err())
	case errors.Is(err, ErrClosed) || closed():
		return kept(err, ErrClosed)
	case errors.Is(err, errRefused) || ctx.Err() != nil:
		if last == nil && !errors.Is(err, errRefused) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			last = err
		}
		if last != nil {
			return fmt.Errorf("%w (%s: %v)", ErrNotAcquired, service, last)
		}
		return ErrNotAcquired
	}
	return err
}

// kept returns err where the backend named the call in it and it says
// outcome (with a detail of its own, perhaps), else outcome.
func kept(err, outcome error) error {
	if namesCall(err) && errors.Is(err, outcome) {
		return err
	}
	return outcome
}

// queue is one run of Queue's loop.
type queue[P any] struct {
	line  Line[P]
	ctx   context.Context
	try   bool
	last  error         // the last transient error, for a refusal's detail
	pause time.Duration // before the next try after a transient error
}

func (q *queue[P]) run() (*Lease, error) {
	for rejoins := 0; ; rejoins++ {
		if q.try && rejoins > tryRejoins {
			return nil, errRefused
		}
		p, ok, err := q.line.Join(q.ctx)
		switch {
		case err != nil:
			if !q.again(err) {
				return nil, err
			}
		case ok:
			if l, err := q.stand(p); l != nil || err != nil {
				return l, err
			}
		}
	}
}

// stand waits in line at p until it is granted (the Lease), or lost (nil,
// nil: join again), or the call ends (its error). p is left unless it
// became the Lease.
func (q *queue[P]) stand(p P) (*Lease, error) {
	for {
		st, err := q.line.Look(q.ctx, p)
		if err != nil {
			if q.again(err) {
				continue
			}
			q.line.Leave(p)
			return nil, err
		}
		switch {
		case st == Granted:
			return q.line.Grant(q.ctx, p)
		case st == Gone:
			q.line.Leave(p)
			return nil, nil
		case q.try:
			q.line.Leave(p)
			return nil, errRefused
		}
		gone, err := q.line.Wait(q.ctx, p)
		if err != nil || gone {
			q.line.Leave(p)
			if err != nil && !q.again(err) {
				return nil, err
			}
			return nil, nil
		}
		q.pause = firstPause
	}
}

// again reports whether err is worth another try within the wait, after
// the pause it takes.
func (q *queue[P]) again(err error) bool {
	if q.try || !q.line.Transient(err) || q.ctx.Err() != nil {
		return false
	}
	q.last = err
	t := time.NewTimer(q.pause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-q.ctx.Done():
	}
	q.pause = min(2*q.pause, maxPause)
	return true
}
