package dlockfake

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
)

// Op is what an Event records.
type Op string

// The Ops of the record.
const (
	Acquire Op = "acquire" // an Acquire call ended: Token granted, or Err why not
	Release Op = "release" // a release reached the Service (Unlock, or a grant given back)
	Verify  Op = "verify"  // a Verify reached the Service
	Extend  Op = "extend"  // an Extend reached the Service
	Renew   Op = "renew"   // the Client renewed a grant (Err: it failed, or found the grant gone)
	Lost    Op = "lost"    // a hold was lost, for Reason (its holder was told)
)

// Event is one entry of a Service's record: something a Client did, or was
// told.
type Event struct {
	At     time.Time // on the Service's clock
	Client string    // the Client's label
	Op     Op
	Shape  string // "mutex", "lock", "fair", "rw_read", "rw_write", "semaphore", "multi"
	Name   string // the lock's name (a MultiLock's: its names, sorted, joined by ",")
	Token  int64  // the grant's fencing token (0: an Acquire that got none)
	// Err is why an Acquire got no lock (it wraps dlock.ErrNotAcquired,
	// ErrUnreachable, ctx's error, ...), or, for a Release, Verify,
	// Extend or Renew, an error wrapping dlock.ErrLockLost when the grant
	// was no longer the holder's, or ErrUnreachable; nil when it went
	// through. For Lost, the Lease's error.
	Err    error
	Reason observe.LostReason // Lost's
}

// String returns the event on one line (At aside), as t.Log shows it.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %q", e.Client, e.Op, e.Shape, e.Name)
	if e.Token != 0 {
		fmt.Fprintf(&b, " token %d", e.Token)
	}
	switch {
	case e.Reason != "":
		fmt.Fprintf(&b, " (%s)", e.Reason)
	case e.Err != nil:
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// errNotOurs is the Err of a request that found the grant no longer the
// holder's.
var errNotOurs = fmt.Errorf("%w (no longer held in the service)", dlock.ErrLockLost)

// Record returns what the Service's Clients did so far, in order.
func (s *Service) Record() []Event {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	return append([]Event(nil), s.record...)
}

func (s *Service) addEvent(e Event) {
	s.recMu.Lock()
	defer s.recMu.Unlock()
	e.At = s.clock.Now()
	s.record = append(s.record, e)
}

// record records op on h by c.
func (c *Client) record(op Op, h *holding, err error) {
	c.svc.addEvent(Event{Client: c.label, Op: op, Shape: h.req.shape, Name: h.req.name, Token: h.token, Err: err})
}

// recorder returns the Observer of a Client's Keeper: o (nil: none), with
// every loss also recorded.
func recorder(o observe.Observer, c *Client) observe.Observer {
	if o == nil {
		o = observe.Nop{}
	}
	r := recording{o, c}
	if t, ok := o.(observe.Tracer); ok {
		return tracingRecording{r, t}
	}
	return r
}

type recording struct {
	observe.Observer
	c *Client
}

func (r recording) ObserveLost(ev observe.LostEvent) {
	r.c.svc.addEvent(Event{Client: r.c.label, Op: Lost, Shape: ev.Shape, Name: ev.Name, Token: ev.Token, Reason: ev.Reason,
		Err: fmt.Errorf("%w (%s)", dlock.ErrLockLost, ev.Reason)})
	r.Observer.ObserveLost(ev)
}

// tracingRecording is a recording of a Tracer, which stays one.
type tracingRecording struct {
	recording
	t observe.Tracer
}

func (r tracingRecording) StartAcquire(ctx context.Context, shape, name string) (context.Context, func(observe.AcquireEvent)) {
	return r.t.StartAcquire(ctx, shape, name)
}
