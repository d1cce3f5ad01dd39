package seam

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/observe"
)

// acquires records the AcquireEvents a Keeper reports.
type acquires struct {
	observe.Nop
	mu  sync.Mutex
	evs []observe.AcquireEvent
}

func (a *acquires) ObserveAcquire(ev observe.AcquireEvent) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, ev)
}

func (a *acquires) events() []observe.AcquireEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]observe.AcquireEvent(nil), a.evs...)
}

// TestBeginRefuses: Begin checks ctx, the names, the options, the backend's
// limits, Close and ctx's end, in that order; each refusal is Acquire's
// error in the one format, reported once as the call's event, and leaves
// nothing for the caller to end.
func TestBeginRefuses(t *testing.T) {
	obs := &acquires{}
	k := NewKeeper[*countOps](obs, nil)
	defer k.Close(context.Background(), nil)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	bad := errors.New("bad limit")
	closed := func() bool { return true }
	for _, tc := range []struct {
		what string
		ctx  context.Context
		r    Request
		opts []Option
		want error
		text string
	}{
		{"nil ctx", nil, Request{Shape: "mutex", Name: "", Closed: closed}, nil, ErrInvalidArgument, `dlock: acquire mutex "": invalid argument: nil context`},
		{"empty name", done, Request{Shape: "mutex", Name: "", Closed: closed}, nil, ErrInvalidName, `dlock: acquire mutex "": invalid lock name: 0 bytes`},
		{"check", done, Request{Shape: "multi", Name: "a", Check: func() error { return ErrInvalidArgument }, Closed: closed}, nil, ErrInvalidArgument, `dlock: acquire multi "a": invalid argument`},
		{"options", done, Request{Shape: "lock", Name: "a", Closed: closed}, []Option{Wait(-2 * time.Second)}, ErrInvalidDuration, `dlock: acquire lock "a": invalid duration`},
		{"portable", done, Request{Shape: "lock", Name: "a", Closed: closed}, []Option{ReplicaAck(1, time.Second)}, ErrInvalidArgument, `dlock: acquire lock "a": invalid argument: ReplicaAck is a Redis option`},
		{"limit", done, Request{Shape: "lock", Name: "a", Limit: func(Options) error { return bad }, Closed: closed}, nil, bad, `dlock: acquire lock "a": bad limit`},
		{"closed", done, Request{Shape: "lock", Name: "a", Limit: func(Options) error { return nil }, Closed: closed}, []Option{ReplicaAck(1, time.Second)}, ErrClosed, `dlock: acquire lock "a": client closed`},
		{"ctx done", done, Request{Shape: "lock", Name: "a"}, nil, context.Canceled, `dlock: acquire lock "a": context canceled`},
	} {
		before := len(obs.events())
		a, err := k.Begin(tc.ctx, tc.r, tc.opts)
		if !errors.Is(err, tc.want) || !strings.HasPrefix(err.Error(), tc.text) {
			t.Errorf("%s: %v, want %q (%v)", tc.what, err, tc.text, tc.want)
		}
		if a.Store != nil || !a.Start.IsZero() {
			t.Errorf("%s: Begin returned an acquisition with its error: %+v", tc.what, a)
		}
		evs := obs.events()[before:]
		if len(evs) != 1 || evs[0].Err != err || evs[0].Shape != tc.r.Shape || evs[0].Name != tc.r.Name {
			t.Errorf("%s: events %+v, want one with the error", tc.what, evs)
		}
	}
}

// TestBeginEnd: a valid call gets its options and wait, and End reports
// its outcome once: a grant's token, or the error named once (an error
// that names its call already, with a detail added, as it is).
func TestBeginEnd(t *testing.T) {
	obs := &acquires{}
	k := NewKeeper[*countOps](obs, nil)
	defer k.Close(context.Background(), nil)
	ctx := context.Background()
	a, err := k.Begin(ctx, Request{Shape: "mutex", Name: "n"}, []Option{Wait(3 * time.Second), LeaseTime(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if a.Options.Wait != 3*time.Second || a.Options.Lease != time.Minute || a.Store != ctx {
		t.Fatalf("options %+v, store ctx %v", a.Options, a.Store)
	}
	if got := a.Until().Sub(a.Start); got != 3*time.Second {
		t.Fatalf("Until is %v after Start, want the Wait", got)
	}
	l, err := k.Lease(ctx, Grant[*countOps]{Shape: "mutex", Name: "n", Token: 9, Sent: time.Now(), TTL: time.Minute, Ops: &countOps{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.End(l, nil); err != nil {
		t.Fatalf("End of a grant: %v", err)
	}
	if evs := obs.events(); len(evs) != 1 || evs[0].Result != observe.Acquired || evs[0].Token != 9 {
		t.Fatalf("events %+v, want the grant's", evs)
	}
	_ = l.Unlock(ctx)

	forever, err := k.Begin(ctx, Request{Shape: "mutex", Name: "n"}, nil) // no Wait: as long as ctx allows
	if err != nil || !forever.Until().IsZero() {
		t.Fatalf("no Wait: until %v, %v; want zero", forever.Until(), err)
	}
	if err := forever.End(nil, ErrNotAcquired); !errors.Is(err, ErrNotAcquired) || err.Error() != `dlock: acquire mutex "n": not acquired` {
		t.Fatalf("End of a refusal: %v", err)
	}
	b, err := k.Begin(ctx, Request{Shape: "lock", Name: "m"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	detailed := fmt.Errorf("%w (a detail)", StoreErr(ctx, "acquire", "lock", "m", context.DeadlineExceeded))
	if err := b.End(nil, detailed); err != detailed {
		t.Fatalf("End of an error that names its call: %v, want it as it is", err)
	}
	evs := obs.events()
	if len(evs) != 3 || evs[1].Result != observe.NotAcquired || evs[2].Result != observe.AcquireErr || evs[2].Err != detailed {
		t.Fatalf("events %+v", evs)
	}
}
