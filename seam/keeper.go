package seam

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/internal/clock"
	"github.com/dlockgo/dlock/internal/tasks"
	"github.com/dlockgo/dlock/observe"
)

// Keeper keeps the grants of one backend client and turns each into the
// Lease its caller sees. It is the one owner of the hold lifecycle: a hold
// is registered, joined by re-entries, renewed, lost and released here, and
// registration and loss are one step under the Keeper's lock, so a grant
// that is already past its deadline when it arrives is reported lost and
// never left registered. O is the backend's GrantOps type. A Keeper is safe
// for concurrent use.
//
// Every hold's local deadline is kept in one heap with one timer for the
// earliest: a hold costs no timer of its own, and a hold whose deadline
// passes is lost when the timer fires (and by any check of its Lease before
// then).
type Keeper[O GrantOps] struct{ k keeper }

// NewKeeper returns a Keeper that reports to o (nil: nowhere) and logs
// losses (Warn) and failed renewals (Debug) to logger (nil: never logs).
func NewKeeper[O GrantOps](o observe.Observer, logger *slog.Logger) *Keeper[O] {
	return NewKeeperOn[O](nil, o, logger)
}

// NewKeeperOn is NewKeeper on the clock c (nil: the real one): the
// deadlines, timers and durations of the Keeper's holds and events are
// read on c (Enter's until stays on the real clock). It is the dlock
// module's own: package dlockfake gives its Keepers the clock a test
// moves, and c's type is internal to the module.
func NewKeeperOn[O GrantOps](c clock.Clock, o observe.Observer, logger *slog.Logger) *Keeper[O] {
	if o == nil {
		o = observe.Nop{}
	}
	return &Keeper[O]{keeper{clock: c, observer: o, logger: logger, keyed: make(map[string]*hold), gates: make(map[string]*gate)}}
}

// Lease turns g into a Lease. If g.Key names a live hold, the Lease joins it
// (its deadline rises to this grant's if that is later). If ctx is done, or
// the Keeper is closed, the grant is released and Lease returns ctx's error
// or ErrClosed: a grant that arrived after its caller gave up is given back,
// never leaked. A grant whose deadline has already passed yields a Lease
// that is lost from the start (Err wraps ErrLockLost).
func (k *Keeper[O]) Lease(ctx context.Context, g Grant[O]) (*Lease, error) {
	return k.k.lease(ctx, g.kept())
}

// GiveBack releases a grant nobody will hold (a reentrant re-entry's
// release undoes just that re-entry), within a bounded time and whatever
// ctx says.
func (k *Keeper[O]) GiveBack(ctx context.Context, g Grant[O]) { k.k.giveBack(ctx, g.Ops, 1) }

// Join adds a Lease for owner to the live hold whose Grant.Key is key (a
// reentrant re-entry the store need not hear of: a backend whose store
// does not count re-entries) and reports true; it reports false, and makes
// nothing, when no live hold has that key (the backend then grants anew).
// The Lease's Context carries owner; onLost runs when the hold is lost.
// See Enter for re-entries that race with the first acquisition.
func (k *Keeper[O]) Join(ctx context.Context, key, owner string, onLost func(*Lease)) (*Lease, bool) {
	return k.k.join(ctx, key, owner, onLost)
}

// Enter is Join for an acquisition of a reentrant lock that may race with
// another one of the same key (one owner acquiring from two goroutines): it
// waits until no other acquisition of key is in progress, and then joins
// the live hold of key (l != nil, its Context under ctx) or returns done,
// which the caller must call once its own acquisition ended (its grant
// handed to Lease, or failed): another acquisition of key then joins that
// hold instead of queueing behind it in the store. The wait ends at until
// (zero: no bound but ctx) with an error wrapping ErrNotAcquired, when ctx
// is done with ctx's error, or when the Keeper closes with ErrClosed; a
// free gate is taken whatever ctx and until say.
func (k *Keeper[O]) Enter(ctx context.Context, key, owner string, until time.Time, onLost func(*Lease)) (l *Lease, done func(), err error) {
	return k.k.enter(ctx, key, owner, until, onLost)
}

// Reentered applies the options of a re-entry to the hold that l, the
// Lease Enter or Join returned, joined, as a store that counts re-entries
// does (Redis): its MaxHold caps the hold, and its fixed lease (LeaseTime)
// extends a hold not kept by renewals whose lease ends sooner (Lease.Extend,
// in the store). If that extension fails, l is unlocked and the error
// returned.
func (k *Keeper[O]) Reentered(ctx context.Context, l *Lease, o Options) error {
	h, kk := l.h, &k.k
	kk.mu.Lock()
	now := clock.Now(kk.clock)
	if c := now.Add(o.MaxHold); o.MaxHold > 0 && !h.ended && (h.cap.IsZero() || c.Before(h.cap)) {
		h.cap = c
		kk.moveDeadline(h, h.deadline)
	}
	extend := o.Lease > 0 && !h.g.renewed && h.deadline.Before(LeaseEnd(now, o.Lease))
	kk.mu.Unlock()
	if !extend {
		return nil
	}
	if err := l.Extend(ctx, o.Lease); err != nil {
		_ = l.Unlock(context.WithoutCancel(ctx))
		return renamed("acquire", err)
	}
	return nil
}

// Held returns the live hold whose Grant.Key is key, or nil.
func (k *Keeper[O]) Held(key string) *Hold[O] {
	k.k.mu.Lock()
	defer k.k.mu.Unlock()
	if h := k.k.keyed[key]; h != nil && !h.ended {
		return (*Hold[O])(h)
	}
	return nil
}

// Renewing returns the live holds whose grants are kept by renewals
// (Grant.Renewed): the ones a watchdog or keepalive renews.
func (k *Keeper[O]) Renewing() []*Hold[O] {
	var hs []*Hold[O]
	k.k.each(func(h *hold) {
		if h.g.renewed {
			hs = append(hs, (*Hold[O])(h))
		}
	})
	return hs
}

// Session returns the live holds of session s (Grant.Session).
func (k *Keeper[O]) Session(s any) []*Hold[O] {
	var hs []*Hold[O]
	k.k.each(func(h *hold) {
		if h.g.session == s {
			hs = append(hs, (*Hold[O])(h))
		}
	})
	return hs
}

// RenewSession records a renewal of session s sent at sent that keeps its
// grants for ttl (Hold.Renewed for every live hold of s), and returns how
// many it renewed.
func (k *Keeper[O]) RenewSession(s any, sent time.Time, ttl time.Duration) int {
	kk := &k.k
	kk.mu.Lock()
	defer kk.mu.Unlock()
	n := 0
	for _, h := range slices.Clone([]*hold(kk.due)) {
		if h.g.session == s && !h.ended {
			h.extendedLocked(sent, ttl, true)
			n++
		}
	}
	return n
}

// LoseSession loses every live hold of session s with reason and returns
// how many it lost.
func (k *Keeper[O]) LoseSession(s any, reason observe.LostReason) int {
	n := 0
	for _, h := range k.Session(s) {
		if h.Lose(reason) {
			n++
		}
	}
	return n
}

// HoldOf returns the hold l holds (nil for a nil Lease or one of another
// Keeper's).
func (k *Keeper[O]) HoldOf(l *Lease) *Hold[O] {
	if l == nil || l.h.k != &k.k {
		return nil
	}
	return (*Hold[O])(l.h)
}

// Count returns how many holds the Keeper keeps, and how many of those are
// renewed.
func (k *Keeper[O]) Count() (holds, renewed int) {
	k.k.each(func(h *hold) {
		holds++
		if h.g.renewed {
			renewed++
		}
	})
	return holds, renewed
}

// CloseTimeout bounds the Close of every backend client: it returns within
// this long (plus a round trip), whatever the number of holds and whether
// the store answers.
const CloseTimeout = 2 * time.Second

// Close loses every hold at once (LostClosed: nothing will renew it any
// more; every Lease is told before Close sends anything) and then releases
// the grants in the store, each if it is still ours: the whole hold, so a
// grant whose store counts re-entries (StoreCounts) is released once for
// every Lease still holding it. release gets every release to send at once
// (one entry per release: a backend that can send many in one round trip
// pipelines them) and returns how many failed; nil releases each through
// its own Release, all at once. Close returns when the releases and the
// Keeper's own goroutines (give-backs, top-ups, releases of lost Leases)
// have ended, or when ctx is done, whichever is first: give it a deadline
// (CloseTimeout). A release still in flight then ends by the store
// client's own timeouts; nothing new is sent.
//
// After Close, Lease gives every grant back and returns ErrClosed, Enter
// returns ErrClosed, and an Unlock sends nothing (Close released the
// hold). Close is idempotent: a second call returns at once.
func (k *Keeper[O]) Close(ctx context.Context, release func(ctx context.Context, ops []O) (failed int)) {
	all := func(ctx context.Context, ops []GrantOps) int {
		os := make([]O, len(ops))
		for i, o := range ops {
			os[i] = o.(O)
		}
		if release != nil {
			return release(ctx, os)
		}
		return releaseEach(ctx, os)
	}
	k.k.close(ctx, all)
}

// GiveBackErrors returns how many of the releases the Keeper sent on its
// own since NewKeeper failed in the store: give-backs (a grant nobody will
// hold: late, cancelled, after Close), the release of a hold at its
// MaxHold, and Close's. Each left its lock held in the store until the
// grant's lease runs out (the backend's Stats can show it; an Unlock's
// failed release is the caller's error instead, and ReleaseEvent.Err).
func (k *Keeper[O]) GiveBackErrors() int64 { return k.k.giveBackErrs.Load() }

// Go runs f in a goroutine that Close waits for, within its ctx, as it
// waits for the Keeper's own: the backend's loops and watchers, which its
// Close stops before it calls Keeper.Close. A goroutine started once
// Keeper.Close has returned is not waited for: a backend starts none then.
func (k *Keeper[O]) Go(f func()) { k.k.bg.Go(f) }

// Closed reports whether Close was called.
func (k *Keeper[O]) Closed() bool {
	k.k.mu.Lock()
	defer k.k.mu.Unlock()
	return k.k.closed
}

// startAcquire begins an Acquire call of shape on name (Begin). It returns
// the context the call's store requests run under (the Observer's span when
// it is an observe.Tracer; ctx itself otherwise, and always for a nil ctx)
// and the call, whose done must be called exactly once with its outcome.
func (k *keeper) startAcquire(ctx context.Context, shape, name string) (context.Context, acquireCall) {
	c := acquireCall{obs: k.observer, clock: k.clock, shape: shape, name: name, start: clock.Now(k.clock)}
	if t, ok := k.observer.(observe.Tracer); ok && ctx != nil {
		ctx, c.end = t.StartAcquire(ctx, shape, name)
	}
	return ctx, c
}

// acquireCall is one Acquire call in progress (Keeper.startAcquire).
type acquireCall struct {
	obs         observe.Observer
	clock       clock.Clock
	shape, name string
	start       time.Time
	end         func(observe.AcquireEvent) // a Tracer's
}

// done reports the call's end as its AcquireEvent: l is the Lease it
// returned (the first of several; nil when err is not nil), err its error.
func (c acquireCall) done(l *Lease, err error) {
	ev := acquireEvent(c.shape, c.name, clock.Since(c.clock, c.start), err)
	if err == nil && l != nil {
		ev.Token = l.Token()
	}
	if c.end != nil {
		c.end(ev)
		return
	}
	c.obs.ObserveAcquire(ev)
}

func acquireEvent(shape, name string, wait time.Duration, err error) observe.AcquireEvent {
	ev := observe.AcquireEvent{Shape: shape, Name: name, Result: observe.Acquired, Wait: wait}
	switch {
	case err == nil:
	case isNotAcquired(err):
		ev.Result = observe.NotAcquired
	default:
		ev.Result, ev.Err = observe.AcquireErr, err
	}
	return ev
}

// keeper is a Keeper's state, whatever the backend's GrantOps.
type keeper struct {
	clock    clock.Clock // nil: the real clock
	observer observe.Observer
	logger   *slog.Logger

	mu     sync.Mutex
	due    dueHeap          // live holds by deadline
	keyed  map[string]*hold // live holds with a Grant.Key (reentrant joins)
	gates  map[string]*gate // reentrant acquisitions in progress (Enter)
	timer  clock.Timer      // fires at due[0]'s deadline; nil until the first hold
	armed  time.Time        // when timer fires (zero: stopped)
	closed bool
	closeC chan struct{} // closed by close (Enter's waits end)

	bg           tasks.Group // the goroutines the Keeper started (give-backs, top-ups, lost releases): Close waits for them
	giveBackErrs atomic.Int64
}

func (k *keeper) lease(ctx context.Context, g grant) (*Lease, error) {
	if err := ctx.Err(); err != nil { // cancelled while the grant was in flight: give it back
		k.giveBack(ctx, g.ops, 1)
		return nil, Wrap("acquire", g.shape, g.name, err)
	}
	deadline := LeaseEnd(g.sent, g.ttl)
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		k.giveBack(ctx, g.ops, 1)
		return nil, Wrap("acquire", g.shape, g.name, ErrClosed)
	}
	if h := k.keyed[g.key]; g.key != "" && h != nil && !h.ended {
		l := &Lease{}
		l.init(h, ctx, g.owner, g.onLost)
		h.attach(l)
		if g.maxHold > 0 { // a re-entry's cap caps the hold it joins
			if c := clock.Now(k.clock).Add(g.maxHold); h.cap.IsZero() || c.Before(h.cap) {
				h.cap = c
			}
		}
		if deadline.After(h.deadline) || (!h.cap.IsZero() && h.cap.Before(h.deadline)) {
			k.moveDeadline(h, maxTime(deadline, h.deadline))
		}
		k.mu.Unlock()
		h.pastDeadline()
		return l, nil
	}
	full := g.ttl
	if g.lease > g.ttl {
		full = g.lease
	}
	ctx = parentOf(ctx, g)
	h := &hold{k: k, g: g, since: clock.Now(k.clock), deadline: deadline}
	if g.maxHold > 0 { // from the grant as the caller gets it (Sent may be long before: a hand-off, a session's keepalive)
		h.cap = h.since.Add(g.maxHold)
		h.deadline = minTime(h.deadline, h.cap)
	}
	h.g.ttl = full
	l := &h.first
	l.init(h, ctx, g.owner, g.onLost)
	h.leases = append(h.one[:0], l)
	k.register(h)
	if full > g.ttl {
		h.topUpAt(clock.Now(k.clock).Add(full))
	}
	k.mu.Unlock()
	h.pastDeadline() // a late grant is lost now, before its caller sees it
	return l, nil
}

func (k *keeper) join(ctx context.Context, key, owner string, onLost func(*Lease)) (*Lease, bool) {
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

// gate serialises the acquisitions of one reentrant key (Enter).
type gate struct {
	ch    chan struct{} // one token: held by the acquisition in progress
	users int
}

// take takes the gate's token: at once if it is free, else when it is
// given back, unless until passes (ErrNotAcquired), ctx ends or closed
// closes first.
func (g *gate) take(ctx context.Context, until time.Time, closed <-chan struct{}) error {
	select {
	case g.ch <- struct{}{}:
		return nil
	default:
	}
	var timeout <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case g.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-closed:
		return ErrClosed
	case <-timeout:
		return fmt.Errorf("%w: another acquisition of this lock by the same owner is in progress", ErrNotAcquired)
	}
}

func (k *keeper) enter(ctx context.Context, key, owner string, until time.Time, onLost func(*Lease)) (*Lease, func(), error) {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil, nil, ErrClosed
	}
	if k.closeC == nil {
		k.closeC = make(chan struct{})
	}
	closeC := k.closeC
	g := k.gates[key]
	if g == nil {
		g = &gate{ch: make(chan struct{}, 1)}
		k.gates[key] = g
	}
	g.users++
	k.mu.Unlock()
	drop := func() {
		k.mu.Lock()
		if g.users--; g.users == 0 && k.gates[key] == g {
			delete(k.gates, key)
		}
		k.mu.Unlock()
	}
	if err := g.take(ctx, until, closeC); err != nil {
		drop()
		return nil, nil, err
	}
	done := func() { <-g.ch; drop() }
	if l, ok := k.join(ctx, key, owner, onLost); ok {
		done()
		return l, nil, nil
	}
	return nil, done, nil
}

// each calls f for every live hold, under k.mu (f must not call back).
func (k *keeper) each(f func(*hold)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, h := range k.due {
		f(h)
	}
}

// giveBack sends n releases of a grant nobody will hold (n > 1: every
// count of a hold the store counts), within unlockTimeout whatever ctx
// says, and counts those that fail.
func (k *keeper) giveBack(ctx context.Context, ops GrantOps, n int) {
	if ops == nil {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
	defer cancel()
	for range n {
		if _, err := ops.Release(rctx); err != nil {
			k.giveBackErrs.Add(1)
		}
	}
}

// releaseEach sends every release of ops at once, each through its own
// Release, and returns how many failed.
func releaseEach[O GrantOps](ctx context.Context, ops []O) int {
	var failed atomic.Int64
	var wg sync.WaitGroup
	for _, o := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := o.Release(ctx); err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(failed.Load())
}

// freeLocked marks the ended hold h released in the store by the Keeper
// (MaxHold, Close: no Unlock sends anything after that) and returns how
// many releases free it: one per Lease still holding it when the store
// counts re-entries, else one. k.mu is held.
func (h *hold) freeLocked() int {
	h.freed = true
	if h.g.storeCounts {
		return max(len(h.leases), 1)
	}
	return 1
}

// goLocked runs f in a goroutine Close waits for, unless the Keeper is
// closed (then it reports false and runs nothing). k.mu is held.
func (k *keeper) goLocked(f func()) bool {
	if k.closed {
		return false
	}
	k.bg.Go(f)
	return true
}

// register adds the new hold h; k.mu is held.
func (k *keeper) register(h *hold) {
	heap.Push(&k.due, h)
	if h.g.key != "" {
		k.keyed[h.g.key] = h
	}
	k.rearm()
}

// unregister removes h; k.mu is held.
func (k *keeper) unregister(h *hold) {
	if h.idx >= 0 {
		heap.Remove(&k.due, h.idx)
		k.rearm()
	}
	if k.keyed[h.g.key] == h {
		delete(k.keyed, h.g.key)
	}
}

// moveDeadline sets h's deadline to d (at most its MaxHold cap); k.mu is
// held.
func (k *keeper) moveDeadline(h *hold, d time.Time) {
	if !h.cap.IsZero() {
		d = minTime(d, h.cap)
	}
	h.deadline = d
	if h.idx >= 0 {
		heap.Fix(&k.due, h.idx)
		k.rearm()
	}
}

// rearm points the timer at the earliest deadline; k.mu is held.
func (k *keeper) rearm() {
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
		k.timer = clock.AfterFunc(k.clock, clock.Until(k.clock, next), k.expire)
		return
	}
	k.timer.Reset(clock.Until(k.clock, next))
}

// expire loses every hold whose deadline has passed, and arms the timer for
// the next one.
func (k *keeper) expire() {
	var after []func()
	now := clock.Now(k.clock)
	k.mu.Lock()
	k.armed = time.Time{}
	for len(k.due) > 0 && !now.Before(k.due[0].deadline) {
		after = append(after, k.endPastLocked(k.due[0]))
	}
	k.rearm()
	k.mu.Unlock()
	for _, f := range after {
		f()
	}
}

// endPastLocked ends h, whose deadline has passed, as lost, and returns
// what follows once k.mu is released: the report, and at MaxHold the
// release of the whole hold in the store (its holder is past its cap: the
// lock is freed for others). k.mu is held.
func (k *keeper) endPastLocked(h *hold) func() {
	reason := h.expiryReason()
	var n int
	if reason == observe.LostMaxHold {
		n = h.freeLocked()
	}
	marked, renewals := k.end(h, reason)
	if n > 0 {
		k.goLocked(func() { k.giveBack(context.Background(), h.g.ops, n) })
	}
	return func() { h.report(reason, marked, renewals) }
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// lose ends h as lost and reports it; false if it had already ended.
func (k *keeper) lose(h *hold, reason observe.LostReason) bool {
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
func (k *keeper) end(h *hold, reason observe.LostReason) (marked, renewals int) {
	h.ended = true
	h.lost = Wrap("hold", h.g.shape, h.g.name, fmt.Errorf("%w (%s)", ErrLockLost, reason))
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
func (h *hold) stopTopUp() {
	if h.topUp != nil {
		h.topUp.Stop()
	}
}

// detachment is what Unlock learns as it detaches its Lease.
type detachment struct {
	lost             error // the Lease's loss, if it was lost first
	freed            bool  // the Keeper released the hold in the store: send nothing
	last             bool  // the hold ended with this Lease
	others, renewals int
}

// detach marks l released and removes it from its hold, in one step under
// the Keeper's lock, so a loss is either seen by this Unlock (lost is set)
// or comes after the Lease left (it is not this Lease's); a hold whose
// deadline has passed is lost first. When l was the last Lease the hold
// ends (unregistered, no renewal any more) before any release is sent. ok
// is false if l was already released.
func (k *keeper) detach(h *hold, l *Lease) (d detachment, ok bool) {
	k.mu.Lock()
	var after func()
	if !h.ended && !clock.Now(k.clock).Before(h.deadline) {
		after = k.endPastLocked(h)
	}
	l.mu.Lock()
	ok = !l.released
	l.released = true
	d.lost = l.err
	l.mu.Unlock()
	if ok {
		if i := slices.Index(h.leases, l); i >= 0 {
			h.leases = slices.Delete(h.leases, i, i+1)
		}
		d.last = len(h.leases) == 0 && !h.ended
		if d.last {
			h.ended = true
			h.stopTopUp()
			k.unregister(h)
		}
	}
	d.freed, d.others, d.renewals = h.freed, len(h.leases), h.renewals
	k.mu.Unlock()
	if after != nil {
		after()
	}
	return d, ok
}

func (k *keeper) close(ctx context.Context, release func(context.Context, []GrantOps) int) {
	type ended struct {
		h                *hold
		marked, renewals int
	}
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return
	}
	k.closed = true
	if k.closeC != nil {
		close(k.closeC)
	}
	if k.timer != nil {
		k.timer.Stop()
	}
	var all []ended
	var ops []GrantOps
	for len(k.due) > 0 {
		h := k.due[0]
		for range h.freeLocked() {
			ops = append(ops, h.g.ops)
		}
		marked, renewals := k.end(h, observe.LostClosed)
		all = append(all, ended{h, marked, renewals})
	}
	k.mu.Unlock()
	for _, e := range all {
		e.h.report(observe.LostClosed, e.marked, e.renewals)
	}
	if len(ops) > 0 {
		k.bg.Go(func() { k.giveBackErrs.Add(int64(release(ctx, ops))) })
	}
	k.bg.Wait(ctx)
}

func isNotAcquired(err error) bool { return errors.Is(err, ErrNotAcquired) }

// dueHeap is the live holds ordered by deadline (container/heap).
type dueHeap []*hold

func (d dueHeap) Len() int           { return len(d) }
func (d dueHeap) Less(i, j int) bool { return d[i].deadline.Before(d[j].deadline) }
func (d dueHeap) Swap(i, j int) {
	d[i], d[j] = d[j], d[i]
	d[i].idx, d[j].idx = i, j
}
func (d *dueHeap) Push(x any) {
	h := x.(*hold)
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
