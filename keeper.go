package dlock

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Keeper keeps the grants of one backend client and turns each into the
// Lease its caller sees (see the backend seam in seam.go). It is the one
// owner of the hold lifecycle: a hold is registered, renewed, lost and
// released here, and registration and loss are one step under the Keeper's
// lock, so a grant that is already past its deadline when it arrives is
// reported lost and never left registered. A Keeper is safe for concurrent
// use.
type Keeper struct {
	observer Observer
	logger   *slog.Logger

	mu     sync.Mutex
	holds  map[*Hold]struct{}
	keyed  map[string]*Hold // live holds with a Grant.Key (reentrant joins)
	closed bool
}

// NewKeeper returns a Keeper that reports to o (nil: nowhere) and logs
// losses (Warn) and failed renewals (Debug) to logger (nil: never logs).
func NewKeeper(o Observer, logger *slog.Logger) *Keeper {
	if o == nil {
		o = nopObserver{}
	}
	return &Keeper{observer: o, logger: logger, holds: make(map[*Hold]struct{}), keyed: make(map[string]*Hold)}
}

// Lease turns g into a Lease. If g.Key names a live hold, the Lease joins it
// (its deadline rises to this grant's if that is later). If ctx is done, or
// the Keeper is closed, the grant is released and Lease returns ctx's error
// or ErrClosed: a grant that arrived after its caller gave up is given back,
// never leaked. A grant whose deadline has already passed yields a Lease
// that is lost from the start (Err wraps ErrLockLost).
func (k *Keeper) Lease(ctx context.Context, g Grant) (*Lease, error) {
	if err := ctx.Err(); err != nil { // cancelled while the grant was in flight: give it back
		k.giveBack(ctx, g)
		return nil, wrap("acquire", g.Name, err)
	}
	deadline := g.Sent.Add(g.TTL - Drift(g.TTL))
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		k.giveBack(ctx, g)
		return nil, wrap("acquire", g.Name, ErrClosed)
	}
	if h := k.keyed[g.Key]; g.Key != "" && h != nil {
		l := newLease(ctx, h, g.Owner, g.OnLost)
		if h.attach(l) {
			k.mu.Unlock()
			h.raiseDeadline(deadline)
			h.pastDeadline()
			return l, nil
		}
	}
	full := g.TTL
	if g.Lease > g.TTL {
		full = g.Lease
	}
	h := &Hold{k: k, g: g, since: time.Now(), deadline: deadline}
	h.g.TTL = full
	l := newLease(ctx, h, g.Owner, g.OnLost)
	k.holds[h] = struct{}{}
	if g.Key != "" {
		k.keyed[g.Key] = h
	}
	h.start(l)
	if full > g.TTL {
		h.topUpAt(time.Now().Add(full))
	}
	k.mu.Unlock()
	h.pastDeadline() // a late grant is lost now, before its caller sees it
	return l, nil
}

// Join adds a Lease for owner to the live hold whose Grant.Key is key (a
// reentrant re-entry that needs nothing from the store) and reports true;
// it reports false, and makes nothing, when no live hold has that key (the
// backend then grants anew). The Lease's Context carries owner; onLost runs
// when the hold is lost.
func (k *Keeper) Join(ctx context.Context, key, owner string, onLost func(*Lease)) (*Lease, bool) {
	if key == "" || ctx.Err() != nil {
		return nil, false
	}
	k.mu.Lock()
	h := k.keyed[key]
	if k.closed || h == nil {
		k.mu.Unlock()
		return nil, false
	}
	l := newLease(ctx, h, owner, onLost)
	ok := h.attach(l)
	k.mu.Unlock()
	if !ok {
		l.cancel(context.Canceled)
		return nil, false
	}
	return l, true
}

// giveBack releases a grant nobody will hold (a reentrant re-entry's
// release undoes just that re-entry).
func (k *Keeper) giveBack(ctx context.Context, g Grant) {
	if g.Ops != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		defer cancel()
		_, _ = g.Ops.Release(rctx)
	}
}

// lose ends h as lost: under k.mu and h.mu it is unregistered and every
// Lease marked, so nobody sees a registered hold that is lost or a lost hold
// whose Leases still look held.
func (k *Keeper) lose(h *Hold, reason LostReason) bool {
	k.mu.Lock()
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		k.mu.Unlock()
		return false
	}
	h.ended = true
	h.lost = wrap(h.g.Shape, h.g.Name, fmt.Errorf("%w (%s)", ErrLockLost, reason))
	h.stopTimers()
	k.unregister(h)
	marked := 0
	for _, l := range h.leases {
		if l.markLost(h.lost) {
			marked++
		}
	}
	h.mu.Unlock()
	k.mu.Unlock()
	h.report(reason, marked)
	return true
}

// unregister removes h; k.mu is held.
func (k *Keeper) unregister(h *Hold) {
	delete(k.holds, h)
	if k.keyed[h.g.Key] == h {
		delete(k.keyed, h.g.Key)
	}
}

// detach removes l from its hold; when it was the last Lease the hold ends
// (timers stopped, unregistered, no renewal any more) before any release is
// sent, and detach returns true.
func (k *Keeper) detach(h *Hold, l *Lease) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if i := slices.Index(h.leases, l); i >= 0 {
		h.leases = slices.Delete(h.leases, i, i+1)
	}
	last := len(h.leases) == 0 && !h.ended
	if last {
		h.ended = true
		h.stopTimers()
		k.unregister(h)
	}
	return last
}

// Renewing returns the live holds whose grants are kept by renewals
// (Grant.Renewed): the ones a watchdog or keepalive renews.
func (k *Keeper) Renewing() []*Hold {
	k.mu.Lock()
	defer k.mu.Unlock()
	hs := make([]*Hold, 0, len(k.holds))
	for h := range k.holds {
		if h.g.Renewed {
			hs = append(hs, h)
		}
	}
	return hs
}

// Count returns how many holds the Keeper keeps, and how many of those are
// renewed.
func (k *Keeper) Count() (holds, renewed int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for h := range k.holds {
		if h.g.Renewed {
			renewed++
		}
	}
	return len(k.holds), renewed
}

// Close loses every hold (LostClosed: nothing will renew it any more) and
// releases its grant in the store if it is still ours; after Close, Lease
// gives every grant back and returns ErrClosed. Close is idempotent.
func (k *Keeper) Close() {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return
	}
	k.closed = true
	hs := make([]*Hold, 0, len(k.holds))
	for h := range k.holds {
		hs = append(hs, h)
	}
	k.mu.Unlock()
	for _, h := range hs {
		h.Lose(LostClosed)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = h.g.Ops.Release(ctx)
		cancel()
	}
}

// Closed reports whether Close was called.
func (k *Keeper) Closed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.closed
}

// Acquired reports an Acquire call that started at start and ended with err
// (nil: acquired) to the Observer.
func (k *Keeper) Acquired(shape, name string, start time.Time, err error) {
	ev := AcquireEvent{Shape: shape, Name: name, Result: Acquired, Wait: time.Since(start)}
	switch {
	case err == nil:
	case isNotAcquired(err):
		ev.Result = NotAcquired
	default:
		ev.Result, ev.Err = AcquireErr, err
	}
	k.observer.ObserveAcquire(ev)
}
