package seam

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/dlockgo/dlock/internal/clock"
	"github.com/dlockgo/dlock/observe"
)

// Drift is the safety margin taken off every lease on the client's clock, so
// the client gives a lease up before the store can expire it and grant it to
// someone else: 1% of the lease plus 2 ms (the Redlock paper's allowance for
// clock-rate differences and timer lateness). A Keeper applies it to every
// Grant; a backend that keeps deadlines of its own (a session's) uses it too.
func Drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// LeaseEnd is when a grant sent at sent (before its request went out) for
// ttl ends on the client's monotonic clock: sent + ttl - Drift(ttl). A
// grant whose reply arrives after its LeaseEnd is late: the store may have
// expired it already and granted the lock to someone else, so it is never
// used; Acquire gives it back, counts it as a refusal and tries again
// while its Wait allows (LateDetail says why when it runs out).
func LeaseEnd(sent time.Time, ttl time.Duration) time.Time { return sent.Add(ttl - Drift(ttl)) }

// LateDetail is the detail Acquire's error adds when the last n grants in
// a row arrived after their LeaseEnd and were given back.
func LateDetail(n int) string {
	if n == 1 {
		return "a grant arrived after its lease ran out and was given back: replies are slower than the lease"
	}
	return fmt.Sprintf("%d grants in a row arrived after their lease ran out and were given back: replies are slower than the lease", n)
}

// Hold is one grant kept by a Keeper: one lock held by one owner through one
// backend client, shared by every Lease of that owner on that lock
// (reentrant acquisitions). The Keeper keeps its local deadline on the
// monotonic clock and its loss; a backend calls Renewed after each
// successful renewal and Lose when it learns the grant is gone.
type Hold[O GrantOps] hold

// hold is a Hold as the Keeper keeps it, whatever the backend's GrantOps.
type hold struct {
	k     *keeper
	g     grant // as granted; g.ttl is the lease (or watchdog timeout) asked for
	since time.Time

	// Under k.mu:
	deadline time.Time
	lastSent time.Time   // of the latest extension or renewal that moved the deadline
	cap      time.Time   // the latest the deadline may be (MaxHold); zero: none
	idx      int         // in k.due; -1 once it left (ended)
	topUp    clock.Timer // set while a short first grant awaits its extension
	leases   []*Lease    // the Leases sharing the hold (backed by one while there is one)
	one      [1]*Lease
	lost     error // non-nil once lost; wraps ErrLockLost
	ended    bool  // lost, or its last Lease released: it takes no new Lease
	freed    bool  // ended, and released in the store by the Keeper (MaxHold, Close): Unlock sends nothing
	renewals int

	first Lease // the first Lease, allocated with the hold
}

// Name returns the lock's name.
func (h *Hold[O]) Name() string { return h.g.name }

// Token returns the grant's fencing token.
func (h *Hold[O]) Token() int64 { return h.g.token }

// Ops returns the grant's operations, as the backend gave them.
func (h *Hold[O]) Ops() O { return h.g.ops.(O) }

// Renewed records a renewal sent at sent that made the store keep the grant
// for ttl: the local deadline moves to sent + ttl - Drift(ttl). It does
// nothing once the hold has ended (a renewal never revives a lost or
// released hold).
func (h *Hold[O]) Renewed(sent time.Time, ttl time.Duration) { (*hold)(h).extended(sent, ttl, true) }

// RenewFailed reports a renewal that failed with err without telling
// whether the grant is still ours (the store could not be reached): the
// hold stays until its deadline, and is lost then unless a renewal
// succeeds first.
func (h *Hold[O]) RenewFailed(err error) { (*hold)(h).renewFailed(err) }

// Lose marks the hold lost, with reason, and every Lease still holding it:
// each Lease's Context is cancelled with a cause wrapping ErrLockLost, Done
// closes, OnLost runs, the Observer and the logger are told. It returns
// false if the hold had already ended (lost or released).
func (h *Hold[O]) Lose(reason observe.LostReason) bool { return (*hold)(h).lose(reason) }

func (h *hold) lose(reason observe.LostReason) bool { return h.k.lose(h, reason) }

// topUpAt arranges for a hold granted for less than the lease it asked for
// (a hand-off grants at most what was left of the waiter's queue deadline)
// to be extended to end (a renewed hold: to its TTL) when two thirds of what
// the short grant leaves have passed; a hold released, extended or renewed
// before then costs no extension. If the extension finds the lock gone the
// hold is lost; if it fails, it is tried again at two thirds of what is
// left, and the deadline loses the hold unless an extension succeeds in
// time. k.mu is held.
func (h *hold) topUpAt(end time.Time) {
	if h.ended {
		return
	}
	h.armTopUp(h.deadline, end)
}

// armTopUp starts the top-up timer at two thirds of what is left of the
// hold's deadline; k.mu is held.
func (h *hold) armTopUp(short, end time.Time) {
	c := h.k.clock
	h.topUp = clock.AfterFunc(c, clock.Until(c, h.deadline)*2/3, func() { h.topUpTo(short, end) })
}

// topUpTo extends the hold to end unless an Extend or a renewal already
// moved its deadline past short, the short grant's, or the hold ended (a
// Close waits for a top-up under way).
func (h *hold) topUpTo(short, end time.Time) {
	k := h.k
	k.mu.Lock()
	done := h.ended || h.deadline.After(short) || k.closed
	if !done {
		k.bg.Add(1)
	}
	k.mu.Unlock()
	if done {
		return
	}
	defer k.bg.Done()
	d := clock.Until(k.clock, end)
	if h.g.renewed {
		d = h.g.ttl
	}
	if d < time.Millisecond {
		return // the lease ends on its own
	}
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	sent := clock.Now(k.clock)
	ok, err := h.g.ops.Extend(ctx, d)
	switch {
	case err != nil:
		k.debug("dlock: extending a hand-off failed", h, err)
		k.mu.Lock()
		if !h.ended && clock.Until(k.clock, h.deadline) > 10*time.Millisecond {
			h.armTopUp(short, end) // try again
		}
		k.mu.Unlock()
	case !ok:
		h.lose(observe.LostDeletedOrTaken)
	default:
		h.extended(sent, d, false)
	}
}

// extended records a successful extension or renewal sent at sent.
func (h *hold) extended(sent time.Time, ttl time.Duration, renewal bool) {
	k := h.k
	k.mu.Lock()
	defer k.mu.Unlock()
	h.extendedLocked(sent, ttl, renewal)
}

// extendedLocked is extended with k.mu held.
func (h *hold) extendedLocked(sent time.Time, ttl time.Duration, renewal bool) {
	if h.ended || sent.Before(h.lastSent) {
		return // an older round that confirmed after a newer one: the newer one counts
	}
	h.lastSent = sent
	k := h.k
	k.moveDeadline(h, LeaseEnd(sent, ttl))
	if renewal {
		h.renewals++
		// Reported under the lock: no renewal is reported after the hold ended.
		k.observer.ObserveRenewal(observe.RenewalEvent{Shape: h.g.shape, Name: h.g.name, Token: h.g.token, OK: true, Held: clock.Since(k.clock, h.since), Renewals: h.renewals})
	}
}

func (h *hold) renewFailed(err error) {
	h.k.observer.ObserveRenewal(observe.RenewalEvent{Shape: h.g.shape, Name: h.g.name, Token: h.g.token, Held: clock.Since(h.k.clock, h.since), Renewals: h.renewalCount(), Err: err})
	h.k.debug("dlock: renewal failed", h, err)
}

// renewalCount returns the successful renewals so far.
func (h *hold) renewalCount() int {
	h.k.mu.Lock()
	defer h.k.mu.Unlock()
	return h.renewals
}

func (h *hold) expiryReason() observe.LostReason {
	if !h.cap.IsZero() && !h.deadline.Before(h.cap) {
		return observe.LostMaxHold
	}
	if h.g.renewed {
		return observe.LostUnreachable
	}
	return observe.LostExpired
}

// fixedLease is the lease events report: 0 for a renewed hold.
func (h *hold) fixedLease() time.Duration {
	if h.g.renewed {
		return 0
	}
	return h.g.ttl
}

// pastDeadline marks the hold lost if its deadline has passed on the local
// clock: a lease not renewed or extended in time is lost, whatever the store
// may still say. The Keeper's timer calls it (through expire), and so does
// every check of the lease. When it returns, a hold whose deadline has
// passed has been lost and every one of its Leases marked.
func (h *hold) pastDeadline() {
	k := h.k
	k.mu.Lock()
	if h.ended || clock.Now(k.clock).Before(h.deadline) {
		k.mu.Unlock()
		return
	}
	after := k.endPastLocked(h)
	k.mu.Unlock()
	after()
}

// report tells the observer and the log that the hold was lost, ending
// leases Leases.
// Told is implemented by a GrantOps that must know when its holder has
// been told the grant is lost: the Keeper calls Told once every Lease of
// the hold reads as lost (Err, Done, Context), after a loss the backend
// reported (Hold.Lose, Keeper.LoseSession) or found by the Keeper's own
// deadline; not at Close, whose release gives the grant up. Told must not
// block. A backend with a lock-delay clears there what held the lock back
// from others (etcdlock's marks).
type Told interface{ Told() }

// report tells the observer and the logger that h was lost, then its
// GrantOps (Told).
func (h *hold) report(reason observe.LostReason, leases, renewals int) {
	defer func() {
		if t, ok := h.g.ops.(Told); ok && reason != observe.LostClosed {
			t.Told()
		}
	}()
	held := clock.Since(h.k.clock, h.since)
	h.k.observer.ObserveLost(observe.LostEvent{Shape: h.g.shape, Name: h.g.name, Token: h.g.token, Reason: reason, Held: held, Granted: h.since,
		Lease: h.fixedLease(), Renewals: renewals, Leases: leases})
	if h.k.logger != nil {
		h.k.logger.Warn("dlock: lock lost", "shape", h.g.shape, "name", h.g.name, "reason", string(reason), "held", held)
	}
}

// attach adds l to the hold; false if the hold has ended. k.mu is held.
func (h *hold) attach(l *Lease) bool {
	if h.ended {
		return false
	}
	h.leases = append(h.leases, l)
	return true
}

func (k *keeper) debug(msg string, h *hold, err error) {
	if k.logger != nil {
		k.logger.LogAttrs(context.Background(), slog.LevelDebug, msg,
			slog.String("shape", h.g.shape), slog.String("name", h.g.name), slog.Any("err", err))
	}
}

// unlockTimeout bounds a release or extension sent without a caller's
// deadline (a give-back, a top-up, Close).
const unlockTimeout = 5 * time.Second
