package dlockfake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/seam"
)

// request is what one Acquire asks of the Service.
type request struct {
	shape string   // "mutex", "lock", "fair", "rw_read", "rw_write", "semaphore", "multi"
	name  string   // the lock's name (a MultiLock's: its names joined by ",")
	names []string // the names it takes
	mode  seam.Mode
	// family is what a re-entry shares with the hold it joins (the same
	// lock, and owner); "": not reentrant.
	family  string
	permits *seam.Permits // a Semaphore's
	check   func() error  // the names and arguments; nil: seam.CheckName(name)
}

// acquisition is one Acquire call: the seam.Line of its place in the
// Service's queue, whose loop is seam.Queue's.
type acquisition struct {
	c     *Client
	req   *request
	o     seam.Options
	ctx   context.Context // the caller's: the Lease derives from it
	owner string          // Grant.Owner: a reentrant lock's owner, else ""
	id    string          // the holder id in the store (Lease.ID)
	want  int             // a Semaphore's permit count
	since time.Time
	stop  time.Time // when the Wait runs out, on the Client's clock (zero: never)
	t     turn      // the last attempt's outcome
	sent  time.Time // when it was sent, on the Client's clock
	late  int       // grants in a row that came after their lease ran out
	// Under Service.mu:
	ticket uint64    // its place in the queue; 0: not queued
	place  time.Time // with QueueTimeout, when its place lapses unless refreshed (zero: it lasts the call)
	parked bool      // counted by AwaitWaiters
}

// lapsed reports whether a's place in the queue lapsed by now (it stopped
// refreshing it: its Client paused).
func (a *acquisition) lapsed(now time.Time) bool { return !a.place.IsZero() && !now.Before(a.place) }

// ttl is how long the store keeps the grant: the fixed lease, or the
// Client's TTL for a renewed one.
func (a *acquisition) ttl() time.Duration {
	if a.o.Lease > 0 {
		return a.o.Lease
	}
	return a.c.ttl
}

// errLate is a grant given back because it arrived after its lease ran
// out.
var errLate = errors.New("granted late")

// acquire is Acquire of every shape.
func (c *Client) acquire(ctx context.Context, r *request, opts []dlock.Option) (l *dlock.Lease, err error) {
	defer func() {
		e := Event{Client: c.label, Op: Acquire, Shape: r.shape, Name: r.name, Err: err}
		if l != nil {
			e.Token = l.Token()
		}
		c.svc.addEvent(e)
	}()
	call, err := c.keeper.Begin(ctx, seam.Request{Shape: r.shape, Name: r.name, Check: r.check, Closed: c.isClosed}, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = call.End((*seam.Lease)(l), err) }()
	a := &acquisition{c: c, req: r, o: call.Options, ctx: ctx, id: ids.Token(), since: c.view.Now()}
	if r.family != "" {
		a.owner = seam.OwnerOf(ctx)
		a.id = a.owner
	}
	if r.permits != nil {
		a.want = r.permits.Count()
	}
	if a.o.Wait > 0 {
		a.stop = a.since.Add(a.o.Wait)
	}
	sl, err := seam.Queue(call.Store, &call, seam.Line[*acquisition](a), c.isClosed, "dlockfake")
	return (*dlock.Lease)(sl), err
}

// Join: the call is its own place; Look makes its attempts.
func (a *acquisition) Join(context.Context) (*acquisition, bool, error) { return a, true, nil }

// Look makes an attempt: Granted, Behind (queued, or the Service busy), or
// its refusal for good as the error.
func (a *acquisition) Look(ctx context.Context, _ *acquisition) (seam.Stand, error) {
	if err := a.try(ctx); err != nil {
		return seam.Behind, err
	}
	if a.t.h != nil {
		return seam.Granted, nil
	}
	return seam.Behind, nil
}

// Wait waits for a change in the Service, the wake time of the last
// attempt or the end of the Wait on the Client's clock (the next attempt
// then refuses), ctx, or Close.
func (a *acquisition) Wait(ctx context.Context, _ *acquisition) (bool, error) {
	return false, a.wait(ctx, a.t.changed, earliest(a.t.wake, a.stop))
}

// Grant turns the last attempt's grant into a Lease; a grant that came
// after its lease ran out is given back, and a is refused (a try, or the
// Wait over: ErrNotAcquired naming the late grants) or joins again.
func (a *acquisition) Grant(_ context.Context, _ *acquisition) (*seam.Lease, error) {
	l, err := a.granted(a.ctx, a.t.h, a.sent, a.t.delay)
	a.leave()
	if err != errLate {
		return (*seam.Lease)(l), err
	}
	if a.late++; a.o.Wait == 0 || !a.stop.IsZero() && !a.c.view.Now().Before(a.stop) {
		return nil, fmt.Errorf("%w (%s)", dlock.ErrNotAcquired, seam.LateDetail(a.late))
	}
	return nil, nil
}

// Leave gives up a's place and count.
func (a *acquisition) Leave(*acquisition) { a.leave() }

// Transient: the Service fails for good (FailAcquires) or not at all.
func (a *acquisition) Transient(error) bool { return false }

// try makes one attempt, once the Client is awake and the Service answers
// (BlockAcquires: a blocked attempt waits, a try too).
func (a *acquisition) try(ctx context.Context) error {
	for {
		if err := a.c.awake(ctx); err != nil {
			return err
		}
		a.sent = a.c.view.Now()
		a.t = a.attempt(a.sent, !a.stop.IsZero() && !a.sent.Before(a.stop))
		if !a.t.blocked {
			return a.t.err
		}
		if err := a.wait(ctx, a.t.changed, a.stop); err != nil {
			return err
		}
	}
}

// turn is the outcome of one attempt.
type turn struct {
	h       *holding      // granted
	delay   time.Duration // DelayGrants' delay of its reply
	err     error         // refused for good
	blocked bool          // the Service did not answer (BlockAcquires): try again at a change
	wake    time.Time     // else, look again then (zero: at a change)
	changed <-chan struct{}
}

// attempt is one request to the Service, sent at sent; over says the Wait
// ran out.
func (a *acquisition) attempt(sent time.Time, over bool) turn {
	s := a.c.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if a.lapsed(now) {
		a.dequeue() // a new arrival: behind everyone
	}
	if s.faults.isBlocked(a.req.names) {
		if over {
			return turn{err: fmt.Errorf("%w (the lock service did not answer)", dlock.ErrNotAcquired)}
		}
		a.park()
		return turn{blocked: true, changed: s.changed}
	}
	if take(s.faults.failAcquires, a.req.names) {
		return turn{err: ErrUnreachable}
	}
	h, ref := s.try(a, now)
	switch {
	case ref.err != nil:
		return turn{err: ref.err}
	case h != nil:
		a.dequeue()
		t := turn{h: h, delay: s.faults.delayFor(a.req.names)}
		if t.delay > 0 {
			a.park() // its grant in flight
		} else {
			a.unpark()
		}
		return t
	case a.o.Wait == 0 || over:
		return turn{err: dlock.ErrNotAcquired}
	}
	a.enqueue()
	a.park()
	t := turn{wake: ref.wake}
	if q := a.o.QueueTimeout; q > 0 { // a sign of life every third of it
		a.place = now.Add(q)
		t.wake = earliest(t.wake, sent.Add(q/3))
	}
	t.changed = s.changed
	return t
}

// wait waits until changed is closed, due passes on the Client's clock
// (zero: never), ctx ends or the Client closes.
func (a *acquisition) wait(ctx context.Context, changed <-chan struct{}, due time.Time) error {
	var timeout chan struct{}
	if !due.IsZero() {
		timeout = make(chan struct{})
		t := a.c.view.at(due, func() { close(timeout) })
		defer t.Stop()
	}
	select {
	case <-changed:
	case <-timeout:
	case <-ctx.Done():
		return ctx.Err()
	case <-a.c.closing:
		return dlock.ErrClosed
	}
	return nil
}

// granted turns h, granted to a at sent, into a Lease: at once, or after
// delay (DelayGrants), when it is given back if its lease ran out
// meanwhile (errLate).
func (a *acquisition) granted(ctx context.Context, h *holding, sent time.Time, delay time.Duration) (*dlock.Lease, error) {
	c := a.c
	o := &grantOps{c: c, h: h}
	ttl := a.ttl()
	if a.o.Lease == 0 {
		o.ttl = ttl
	}
	g := seam.Grant[*grantOps]{Shape: a.req.shape, Name: a.req.name, StoreCounts: true, Owner: a.owner, ID: h.id, Token: h.token,
		Sent: sent, TTL: ttl, Renewed: o.ttl > 0, MaxHold: a.o.MaxHold, Ops: o, OnLost: a.o.OnLost}
	if a.req.family != "" {
		g.Key = a.req.family + "\x00" + a.owner
	}
	if delay > 0 {
		if err := a.wait(ctx, nil, sent.Add(delay)); err != nil {
			c.keeper.GiveBack(ctx, g)
			return nil, err
		}
		if !c.view.Now().Before(seam.LeaseEnd(sent, ttl)) {
			c.keeper.GiveBack(ctx, g)
			return nil, errLate
		}
	}
	l, err := c.keeper.Lease(ctx, g)
	if err != nil {
		return nil, err // given back
	}
	hold := c.keeper.HoldOf(l)
	s := c.svc
	s.mu.Lock()
	h.hold = hold
	if a.o.MaxHold > 0 { // the store gives it up at the cap, as the Keeper does
		if end := c.view.Now().Add(a.o.MaxHold); h.cap.IsZero() || end.Before(h.cap) {
			h.cap = end
		}
	}
	s.mu.Unlock()
	if o.ttl > 0 && hold.Ops() == o { // a new hold, not a re-entry that joined one
		c.renewed(o, sent)
	}
	return (*dlock.Lease)(l), nil
}

// enqueue gives a its place behind every waiter of its names; s.mu is
// held.
func (a *acquisition) enqueue() {
	s := a.c.svc
	if a.ticket != 0 {
		return
	}
	s.tickets++
	a.ticket = s.tickets
	for _, n := range a.req.names {
		e := s.entry(n)
		e.waiting = append(e.waiting, a)
	}
}

// dequeue gives a's place up; s.mu is held.
func (a *acquisition) dequeue() {
	s := a.c.svc
	if a.ticket == 0 {
		return
	}
	a.ticket, a.place = 0, time.Time{}
	for _, n := range a.req.names {
		e := s.names[n]
		e.waiting = slices.DeleteFunc(e.waiting, func(w *acquisition) bool { return w == a })
		s.tidy(n)
	}
	s.changedLocked()
}

// park counts a as waiting in the Service (AwaitWaiters); s.mu is held.
func (a *acquisition) park() {
	s := a.c.svc
	if a.parked {
		return
	}
	a.parked = true
	for _, n := range a.req.names {
		s.parked[n]++
	}
	s.changedLocked()
}

// unpark counts a as waiting no more; s.mu is held.
func (a *acquisition) unpark() {
	s := a.c.svc
	if !a.parked {
		return
	}
	a.parked = false
	for _, n := range a.req.names {
		if s.parked[n]--; s.parked[n] == 0 {
			delete(s.parked, n)
		}
	}
	s.changedLocked()
}

// leave gives up a's place and count when its call ends.
func (a *acquisition) leave() {
	s := a.c.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	a.dequeue()
	a.unpark()
}
