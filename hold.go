package dlock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// holdOps is what a lock shape (or backend) does for a lock it holds. It is
// backend-neutral: the Lease drives it and shares the lost-lock machinery.
type holdOps interface {
	// extend sets the remaining lease to ttl if the lock is still ours;
	// false means it is not.
	extend(ctx context.Context, ttl time.Duration) (bool, error)
	// release gives up one hold (op identifies the call, so a retry that
	// was already applied is not applied twice).
	release(ctx context.Context, op string) (releaseResult, error)
	// verify reports whether the lock is still ours.
	verify(ctx context.Context) (bool, error)
}

type releaseResult int

const (
	releaseNotOurs   releaseResult = 0 // gone, or someone else's
	releaseFree      releaseResult = 1 // released; waiters woken
	releaseStillHeld releaseResult = 2 // a reentrant count was decremented
)

// drift is the safety margin taken off every lease on the client's clock, so
// the client gives a lease up before Redis can expire it and grant it to
// someone else: 1% of the lease plus 2 ms (the Redlock paper's allowance for
// clock-rate differences and timer lateness).
func drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// hold is one lock held through one Client by one owner: one grant in Redis,
// shared by every Lease of that owner on that lock (reentrant acquisitions).
// It keeps the local deadline (monotonic clock), its timer, and the loss.
type hold struct {
	c        *Client
	id       string // key in Client.holds
	holder   string // the holder id in the backend (Lease.ID)
	shape    string
	name     string
	ops      holdOps
	fence    int64
	ttl      time.Duration // the fixed lease, or the watchdog timeout
	watchdog bool
	since    time.Time

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer
	topUp    *time.Timer // set while a short hand-off grant awaits its extension
	leases   map[*Lease]struct{}
	lost     error // non-nil once lost; wraps ErrLockLost
	ended    bool  // lost, or its last Lease released: it takes no new Lease
	renewals int
}

func newHold(c *Client, id, shape, name string, ops holdOps, fence int64, ttl time.Duration, watchdog bool, deadline time.Time) *hold {
	return &hold{
		c: c, id: id, shape: shape, name: name, ops: ops, fence: fence, ttl: ttl,
		watchdog: watchdog, since: time.Now(), deadline: deadline,
		leases: make(map[*Lease]struct{}),
	}
}

// start attaches the first Lease and starts the deadline timer.
func (h *hold) start(first *Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.leases[first] = struct{}{}
	h.timer = time.AfterFunc(time.Until(h.deadline), func() { h.pastDeadline() })
}

// raiseDeadline moves the local deadline to d if that is later.
func (h *hold) raiseDeadline(d time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ended && d.After(h.deadline) {
		h.deadline = d
		h.timer.Reset(time.Until(d))
	}
}

// topUpAt arranges for a hold granted for less than the lease it asked for
// (a hand-off grants at most what was left of the waiter's queue deadline)
// to be extended to end (a watchdog hold: to the watchdog timeout) when two
// thirds of what the short grant leaves have passed; a hold released,
// extended or renewed before then costs no extension. If the extension finds
// the lock gone the hold is lost; if it fails, it is tried again at two
// thirds of what is left, and the deadline timer loses the hold unless an
// extension succeeds in time.
func (h *hold) topUpAt(end time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	h.armTopUp(h.deadline, end)
}

// armTopUp starts the top-up timer at two thirds of what is left of the
// hold's deadline; h.mu is held.
func (h *hold) armTopUp(short, end time.Time) {
	h.topUp = time.AfterFunc(time.Until(h.deadline)*2/3, func() { h.topUpTo(short, end) })
}

// topUpTo extends the hold to end unless an Extend or a renewal already
// moved its deadline past short, the short grant's.
func (h *hold) topUpTo(short, end time.Time) {
	h.mu.Lock()
	done := h.ended || h.deadline.After(short)
	h.mu.Unlock()
	if done {
		return
	}
	d := time.Until(end)
	if h.watchdog {
		d = h.ttl
	}
	if d < time.Millisecond {
		return // the lease ends on its own
	}
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	sent := time.Now()
	ok, err := h.ops.extend(ctx, d)
	switch {
	case err != nil:
		if h.c.logger != nil {
			h.c.logger.Debug("dlock: extending a hand-off failed", "shape", h.shape, "name", h.name, "err", err)
		}
		h.mu.Lock()
		if !h.ended && time.Until(h.deadline) > 10*time.Millisecond {
			h.armTopUp(short, end) // try again
		}
		h.mu.Unlock()
	case !ok:
		h.lose(LostDeletedOrTaken)
	default:
		h.extended(sent, d, false)
	}
}

// stopTimers stops the deadline and top-up timers; h.mu is held.
func (h *hold) stopTimers() {
	h.timer.Stop()
	if h.topUp != nil {
		h.topUp.Stop()
	}
}

// extended records a successful extension or renewal sent at sent.
func (h *hold) extended(sent time.Time, ttl time.Duration, renewal bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return
	}
	h.deadline = sent.Add(ttl - drift(ttl))
	h.timer.Reset(time.Until(h.deadline))
	if renewal {
		h.renewals++
		// Reported under h.mu: no renewal is reported after the hold ended.
		h.c.observer.ObserveRenewal(RenewalEvent{Shape: h.shape, Name: h.name, Token: h.fence, OK: true, Held: time.Since(h.since), Renewals: h.renewals})
	}
}

// renewalCount returns the successful renewals so far.
func (h *hold) renewalCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.renewals
}

func (h *hold) expiryReason() LostReason {
	if h.watchdog {
		return LostUnreachable
	}
	return LostExpired
}

// pastDeadline marks the hold lost if its deadline has passed on the local
// clock: a lease not renewed or extended in time is lost, whatever Redis may
// still say. The timer calls it, and so does every check of the lease.
func (h *hold) pastDeadline() bool {
	h.mu.Lock()
	late := !h.ended && !time.Now().Before(h.deadline)
	h.mu.Unlock()
	if late {
		h.lose(h.expiryReason())
	}
	return late
}

// lose marks the hold lost and every Lease still holding it, once; false if
// the hold had already ended (lost or released).
func (h *hold) lose(reason LostReason) bool {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return false
	}
	h.ended = true
	h.lost = fmt.Errorf("dlock: %s %q: %w (%s)", h.shape, h.name, ErrLockLost, reason)
	h.stopTimers()
	leases := make([]*Lease, 0, len(h.leases))
	for l := range h.leases {
		leases = append(leases, l)
	}
	err := h.lost
	h.mu.Unlock()

	h.c.forget(h)
	marked := 0
	for _, l := range leases {
		if l.markLost(err) {
			marked++
		}
	}
	h.report(reason, marked)
	return true
}

// report tells the observer and the log that the hold was lost, ending
// leases Leases.
func (h *hold) report(reason LostReason, leases int) {
	h.c.observer.ObserveLost(LostEvent{Shape: h.shape, Name: h.name, Token: h.fence, Reason: reason, Held: time.Since(h.since),
		Lease: h.fixedLease(), Renewals: h.renewalCount(), Leases: leases})
	if h.c.logger != nil {
		h.c.logger.Warn("dlock: lock lost", "shape", h.shape, "name", h.name, "reason", string(reason), "held", time.Since(h.since))
	}
}

// lostErr returns the loss, or nil.
func (h *hold) lostErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// attach adds l to the hold; false if the hold has ended.
func (h *hold) attach(l *Lease) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return false
	}
	h.leases[l] = struct{}{}
	return true
}

// detach removes l; when it was the last Lease the hold stops its timer and
// leaves the watchdog and the Client before any release is sent, and detach
// returns true.
func (h *hold) detach(l *Lease) bool {
	h.mu.Lock()
	delete(h.leases, l)
	last := len(h.leases) == 0 && !h.ended
	if last {
		h.ended = true
		h.stopTimers()
	}
	h.mu.Unlock()
	if last {
		h.c.forget(h)
	}
	return last
}
