package dlockfake

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
)

// DefaultTTL is how long a Client's renewed grants last without a
// renewal (the Redis watchdog's default): they are renewed every third of
// it.
const DefaultTTL = 30 * time.Second

// Config configures a Client. The zero Config is the defaults written next
// to each field.
type Config struct {
	// TTL is how long the Service keeps a renewed grant (a lease without
	// LeaseTime) past its last renewal (default DefaultTTL, at least 10
	// ms): the Client renews it every TTL/3, and its holder loses it at
	// TTL less seam.Drift after the last renewal that succeeded.
	TTL time.Duration
	// Label names the Client in the Record and in Inspect's holders (a
	// process, a replica). At most 256 bytes; default "client<n>", n
	// counting the Service's Clients from 1.
	Label string
	// Observer, if set, receives the Client's lock events, as a real
	// backend's Config.Observer does.
	Observer observe.Observer
	// Logger, if set, logs lost leases (Warn) and failed renewals (Debug).
	Logger *slog.Logger
}

// Client is one process's client of a Service: it hands out the same
// dlock.Locker and *dlock.Lease as the real backends (Mutex, Lock,
// FairLock, RWLock, Semaphore, MultiLock), keeps its holds in a
// seam.Keeper as they do (the same lost-lock signal, MaxHold, OnLost and
// events), on the Service's clock, and renews its renewed grants every
// TTL/3 from that clock's timers (no goroutine of its own). It is safe for
// concurrent use; Close it when done.
type Client struct {
	svc    *Service
	view   *view
	keeper *seam.Keeper[*grantOps]
	ttl    time.Duration
	label  string

	closing chan struct{} // closed by Close

	mu      sync.Mutex
	closed  bool
	renewal *vtimer   // the next renewal round; nil before the first
	renewAt time.Time // when renewal fires (zero: not armed)
}

// NewClient returns a new Client of s, configured by cfg (at most one
// Config; none: the defaults). It returns an error wrapping
// dlock.ErrInvalidArgument or dlock.ErrInvalidDuration for a bad Config.
func (s *Service) NewClient(cfg ...Config) (*Client, error) {
	if len(cfg) > 1 {
		return nil, seam.WrapCall("new client", fmt.Errorf("%w: %d Configs (want at most one)", dlock.ErrInvalidArgument, len(cfg)))
	}
	c := append(cfg, Config{})[0]
	switch {
	case c.TTL != 0 && c.TTL < 10*time.Millisecond: // shorter, Drift would end it before its first renewal
		return nil, seam.WrapCall("new client", fmt.Errorf("%w: TTL %v (want >= 10ms)", dlock.ErrInvalidDuration, c.TTL))
	case len(c.Label) > 256:
		return nil, seam.WrapCall("new client", fmt.Errorf("%w: label longer than 256 bytes", dlock.ErrInvalidArgument))
	}
	s.mu.Lock()
	s.clients++
	n := s.clients
	s.mu.Unlock()
	cl := &Client{
		svc:     s,
		view:    &view{c: s.clock},
		ttl:     cmp.Or(c.TTL, DefaultTTL),
		label:   cmp.Or(c.Label, "client"+strconv.Itoa(n)),
		closing: make(chan struct{}),
	}
	cl.keeper = seam.NewKeeperOn[*grantOps](cl.view, recorder(c.Observer, cl), c.Logger)
	return cl, nil
}

// Label returns the Client's label.
func (c *Client) Label() string { return c.label }

// Close reports every lease still held through the Client lost
// (LostClosed) and releases it in the Service; acquisitions in progress
// return an error wrapping dlock.ErrClosed, and so does every later one.
// Close is idempotent and returns nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closing)
	if c.renewal != nil {
		c.renewal.Stop()
	}
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), seam.CloseTimeout)
	defer cancel()
	c.keeper.Close(ctx, nil)
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Pause stops the Client as a GC pause or SIGSTOP stops a process: its
// clock stands still while the Service's runs on, its timers wait for
// Resume (it renews nothing, and is told of no deadline passing), and so
// does every call through it that would reach the Service (Acquire,
// Unlock, Verify, Extend), unless its ctx ends first. Its waiters stop
// refreshing their places (a QueueTimeout lapses). The Service gives its
// grants up when their time runs out there, so another Client may be
// granted its locks meanwhile, while its Leases still look held (Err is
// nil on its clock). Pause is idempotent.
func (c *Client) Pause() { c.view.pause() }

// Resume ends a Pause: the Client's clock catches up with the Service's,
// the timers that fell due meanwhile run, in order, before Resume returns
// (leases whose deadline passed are lost, renewals are sent and find what
// the Service did meanwhile), and then the calls that waited go on.
func (c *Client) Resume() { c.view.resume() }

// awake waits while the Client is paused (see Pause).
func (c *Client) awake(ctx context.Context) error { return c.view.awake(ctx, c.closing) }

// grantOps is the Client's part of one grant (seam.GrantOps): each
// operation compares its holding with the store's before it acts.
type grantOps struct {
	c    *Client
	h    *holding
	ttl  time.Duration // a renewed grant's TTL; 0: a fixed lease
	next time.Time     // the next renewal, on the Client's clock; under c.mu
}

func (o *grantOps) Release(ctx context.Context) (seam.Released, error) {
	if err := o.c.awake(ctx); err != nil {
		return seam.ReleasedNotOurs, err
	}
	s := o.c.svc
	s.mu.Lock()
	res := s.release(o.h, s.clock.Now())
	s.mu.Unlock()
	var err error
	if res == seam.ReleasedNotOurs {
		err = errNotOurs
	}
	o.c.record(Release, o.h, err)
	return res, nil
}

func (o *grantOps) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	if err := o.c.awake(ctx); err != nil {
		return false, err
	}
	ok := o.extend(ttl)
	o.c.record(Extend, o.h, notOurs(ok))
	return ok, nil
}

func (o *grantOps) Verify(ctx context.Context) (bool, error) {
	if err := o.c.awake(ctx); err != nil {
		return false, err
	}
	s := o.c.svc
	s.mu.Lock()
	ok := s.alive(o.h, s.clock.Now())
	s.mu.Unlock()
	o.c.record(Verify, o.h, notOurs(ok))
	return ok, nil
}

func (o *grantOps) extend(ttl time.Duration) bool {
	s := o.c.svc
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.extend(o.h, ttl, s.clock.Now())
}

// renewed arms the first renewal of a renewed grant, a third of its TTL
// after it was sent.
func (c *Client) renewed(o *grantOps, sent time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o.next = sent.Add(o.ttl / 3)
	c.armRenewal(o.next)
}

// armRenewal makes the next renewal round come at at, or before; c.mu is
// held.
func (c *Client) armRenewal(at time.Time) {
	if c.closed || at.IsZero() || !c.renewAt.IsZero() && !at.Before(c.renewAt) {
		return
	}
	if c.renewal != nil {
		c.renewal.Stop()
	}
	c.renewal, c.renewAt = c.view.at(at, c.renew), at
}

// renew is a renewal round: every renewed hold whose renewal is due is
// renewed in the Service (unless FailRenewals fails it), and the next
// round is armed at the earliest next renewal.
func (c *Client) renew() {
	c.mu.Lock()
	c.renewAt = time.Time{}
	c.mu.Unlock()
	now := c.view.Now()
	var next time.Time
	for _, h := range c.keeper.Renewing() {
		o := h.Ops()
		c.mu.Lock()
		due := !o.next.After(now)
		if due {
			o.next = now.Add(o.ttl / 3)
		}
		at := o.next
		c.mu.Unlock()
		if due {
			o.renew(h, now)
		}
		next = earliest(next, at)
	}
	c.mu.Lock()
	c.armRenewal(next)
	c.mu.Unlock()
}

// renew renews h (o's hold), sent at sent.
func (o *grantOps) renew(h *seam.Hold[*grantOps], sent time.Time) {
	s := o.c.svc
	s.mu.Lock()
	failed := take(s.faults.failRenewals, o.h.req.names)
	ok := !failed && s.extend(o.h, o.ttl, s.clock.Now())
	s.mu.Unlock()
	switch {
	case failed:
		o.c.record(Renew, o.h, ErrUnreachable)
		h.RenewFailed(ErrUnreachable)
	case !ok:
		o.c.record(Renew, o.h, errNotOurs)
		h.Lose(observe.LostDeletedOrTaken)
	default:
		o.c.record(Renew, o.h, nil)
		h.Renewed(sent, o.ttl)
	}
}

// notOurs is errNotOurs unless ok.
func notOurs(ok bool) error {
	if ok {
		return nil
	}
	return errNotOurs
}
