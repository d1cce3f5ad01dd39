package dlock

import (
	"container/heap"
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
//
// Every hold's local deadline is kept in one heap with one timer for the
// earliest: a hold costs no timer of its own, and a hold whose deadline
// passes is lost when the timer fires (and by any check of its Lease
// before then).
type Keeper struct {
	observer Observer
	logger   *slog.Logger

	mu     sync.Mutex
	due    dueHeap          // live holds by deadline
	keyed  map[string]*Hold // live holds with a Grant.Key (reentrant joins)
	timer  *time.Timer      // fires at due[0]'s deadline; nil until the first hold
	armed  time.Time        // when timer fires (zero: stopped)
	closed bool
}

// NewKeeper returns a Keeper that reports to o (nil: nowhere) and logs
// losses (Warn) and failed renewals (Debug) to logger (nil: never logs).
func NewKeeper(o Observer, logger *slog.Logger) *Keeper {
	if o == nil {
		o = nopObserver{}
	}
	return &Keeper{observer: o, logger: logger, keyed: make(map[string]*Hold)}
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
	if h := k.keyed[g.Key]; g.Key != "" && h != nil && !h.ended {
		l := &Lease{}
		l.init(h, ctx, g.Owner, g.OnLost)
		h.attach(l)
		if deadline.After(h.deadline) {
			k.moveDeadline(h, deadline)
		}
		k.mu.Unlock()
		h.pastDeadline()
		return l, nil
	}
	full := g.TTL
	if g.Lease > g.TTL {
		full = g.Lease
	}
	h := &Hold{k: k, g: g, since: time.Now(), deadline: deadline}
	h.g.TTL = full
	l := &h.first
	l.init(h, ctx, g.Owner, g.OnLost)
	h.leases = append(h.one[:0], l)
	k.register(h)
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
	defer k.mu.Unlock()
	h := k.keyed[key]
	if k.closed || h == nil || h.ended {
		return nil, false
	}
	l := &Lease{}
	l.init(h, ctx, owner, onLost)
	h.attach(l)
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

// register adds the new hold h; k.mu is held.
func (k *Keeper) register(h *Hold) {
	heap.Push(&k.due, h)
	if h.g.Key != "" {
		k.keyed[h.g.Key] = h
	}
	k.rearm()
}

// unregister removes h; k.mu is held.
func (k *Keeper) unregister(h *Hold) {
	if h.idx >= 0 {
		heap.Remove(&k.due, h.idx)
		k.rearm()
	}
	if k.keyed[h.g.Key] == h {
		delete(k.keyed, h.g.Key)
	}
}

// moveDeadline sets h's deadline to d; k.mu is held.
func (k *Keeper) moveDeadline(h *Hold, d time.Time) {
	h.deadline = d
	if h.idx >= 0 {
		heap.Fix(&k.due, h.idx)
		k.rearm()
	}
}

// rearm points the timer at the earliest deadline; k.mu is held.
func (k *Keeper) rearm() {
	if len(k.due) == 0 {
		if !k.armed.IsZero() {
			k.timer.Stop()
			k.armed = time.Time{}
		}
		return
	}
	next := k.due[0].deadline
	if next.Equal(k.armed) {
		return
	}
	k.armed = next
	if k.timer == nil {
		k.timer = time.AfterFunc(time.Until(next), k.expire)
		return
	}
	k.timer.Reset(time.Until(next))
}

// expire loses every hold whose deadline has passed, and arms the timer for
// the next one.
func (k *Keeper) expire() {
	type lost struct {
		h                  *Hold
		reason             LostReason
		leases, renewals   int
	}
	var ended []lost
	now := time.Now()
	k.mu.Lock()
	k.armed = time.Time{}
	for len(k.due) > 0 && !now.Before(k.due[0].deadline) {
		h := k.due[0]
		reason := h.expiryReason()
		marked, renewals := k.end(h, reason)
		ended = append(ended, lost{h, reason, marked, renewals})
	}
	k.rearm()
	k.mu.Unlock()
	for _, e := range ended {
		e.h.report(e.reason, e.leases, e.renewals)
	}
}

// lose ends h as lost and reports it; false if it had already ended.
func (k *Keeper) lose(h *Hold, reason LostReason) bool {
	k.mu.Lock()
	if h.ended {
		k.mu.Unlock()
		return false
	}
	marked, renewals := k.end(h, reason)
	k.mu.Unlock()
	h.report(reason, marked, renewals)
	return true
}

// end ends the live hold h as lost, under k.mu: it is unregistered and
// every Lease marked, so nobody sees a registered hold that is lost or a
// lost hold whose Leases still look held. It returns how many Leases it
// marked and the hold's renewals, for the report the caller makes once
// the lock is released.
func (k *Keeper) end(h *Hold, reason LostReason) (marked, renewals int) {
	h.ended = true
	h.lost = wrap(h.g.Shape, h.g.Name, fmt.Errorf("%w (%s)", ErrLockLost, reason))
	h.stopTopUp()
	k.unregister(h)
	for _, l := range h.leases {
		if l.markLost(h.lost) {
			marked++
		}
	}
	return marked, h.renewals
}

// stopTopUp stops the top-up timer; k.mu is held.
func (h *Hold) stopTopUp() {
	if h.topUp != nil {
		h.topUp.Stop()
	}
}

// detach removes l from its hold; when it was the last Lease the hold ends
// (unregistered, no renewal any more) before any release is sent, and
// detach returns true. It also returns the hold's renewals so far.
func (k *Keeper) detach(h *Hold, l *Lease) (last bool, renewals int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if i := slices.Index(h.leases, l); i >= 0 {
		h.leases = slices.Delete(h.leases, i, i+1)
	}
	last = len(h.leases) == 0 && !h.ended
	if last {
		h.ended = true
		h.stopTopUp()
		k.unregister(h)
	}
	return last, h.renewals
}

// Renewing returns the live holds whose grants are kept by renewals
// (Grant.Renewed): the ones a watchdog or keepalive renews.
func (k *Keeper) Renewing() []*Hold {
	k.mu.Lock()
	defer k.mu.Unlock()
	hs := make([]*Hold, 0, len(k.due))
	for _, h := range k.due {
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
	for _, h := range k.due {
		if h.g.Renewed {
			renewed++
		}
	}
	return len(k.due), renewed
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
	hs := slices.Clone([]*Hold(k.due))
	if k.timer != nil {
		k.timer.Stop()
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

// dueHeap is the live holds ordered by deadline (container/heap).
type dueHeap []*Hold

func (d dueHeap) Len() int           { return len(d) }
func (d dueHeap) Less(i, j int) bool { return d[i].deadline.Before(d[j].deadline) }
func (d dueHeap) Swap(i, j int) {
	d[i], d[j] = d[j], d[i]
	d[i].idx, d[j].idx = i, j
}
func (d *dueHeap) Push(x any) {
	h := x.(*Hold)
	h.idx = len(*d)
	*d = append(*d, h)
}
func (d *dueHeap) Pop() any {
	old := *d
	h := old[len(old)-1]
	old[len(old)-1] = nil
	h.idx = -1
	*d = old[:len(old)-1]
	return h
}
