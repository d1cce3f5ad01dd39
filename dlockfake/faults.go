package dlockfake

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
)

// ErrUnreachable is the store error of the requests a fault fails
// (FailAcquires, FailRenewals): what a client gets from a lock service it
// cannot reach.
var ErrUnreachable = errors.New("dlock: the lock service did not answer (an injected fault)")

// faults are the faults in force, by name; under Service.mu.
type faults struct {
	failAcquires map[string]int
	failRenewals map[string]int
	delays       map[string]delay
	blocked      map[string]int // BlockAcquires not yet undone
}

// delay is DelayGrants': the next n grants reach their caller d late.
type delay struct {
	n int
	d time.Duration
}

func newFaults() faults {
	return faults{failAcquires: map[string]int{}, failRenewals: map[string]int{}, delays: map[string]delay{}, blocked: map[string]int{}}
}

// take uses up one of the faults counted in m for any of names, and
// reports whether there was one.
func take(m map[string]int, names []string) bool {
	for _, n := range names {
		if m[n] > 0 {
			if m[n]--; m[n] == 0 {
				delete(m, n)
			}
			return true
		}
	}
	return false
}

// Lose loses every hold of name now, with reason: LostExpired,
// LostDeletedOrTaken or LostUnreachable (how the holder is told: the
// Lease's Err and its Context's cause name it, its Done closes, OnLost
// runs, the Observer hears it). Whatever the reason, the lock is free in
// the Service afterwards: the first waiter gets it. Lose returns an error
// wrapping dlock.ErrNotHeld if nothing held name, and one wrapping
// dlock.ErrInvalidArgument for another reason; both change nothing.
func (s *Service) Lose(name string, reason observe.LostReason) error {
	if err := seam.CheckName(name); err != nil {
		return seam.Wrap("lose", "", name, err)
	}
	switch reason {
	case observe.LostExpired, observe.LostDeletedOrTaken, observe.LostUnreachable:
	default:
		return seam.Wrap("lose", "", name, fmt.Errorf("%w: reason %q (want %s, %s or %s)", dlock.ErrInvalidArgument,
			reason, observe.LostExpired, observe.LostDeletedOrTaken, observe.LostUnreachable))
	}
	s.mu.Lock()
	hs := append([]*holding(nil), s.live(name, s.clock.Now())...)
	var told []*seam.Hold[*grantOps]
	for _, h := range hs {
		s.remove(h)
		if h.hold != nil { // nil: another process's, or a grant still in flight
			told = append(told, h.hold)
		}
	}
	s.mu.Unlock()
	if len(hs) == 0 {
		return seam.Wrap("lose", "", name, dlock.ErrNotHeld)
	}
	for _, h := range told {
		h.Lose(reason)
	}
	return nil
}

// Take gives name to another process now, whether or not a Client holds
// it: a holder is not told (as when an operator deletes its key, or the
// store expired it behind its back and granted it anew); it finds out at
// its next renewal, Verify, Extend or Unlock, which report the lock lost
// (deleted_or_taken). Acquisitions of name wait behind the other process,
// or get dlock.ErrNotAcquired, until release is called (release is
// idempotent; the waiters queued meanwhile keep their places). The other
// process's token is above every token granted before.
func (s *Service) Take(name string) (release func(), err error) {
	if err := seam.CheckName(name); err != nil {
		return nil, seam.Wrap("take", "", name, err)
	}
	h := &holding{req: &request{shape: "mutex", name: name, names: []string{name}}, id: "elsewhere", count: 1}
	s.mu.Lock()
	now := s.clock.Now()
	for _, old := range append([]*holding(nil), s.live(name, now)...) {
		s.remove(old)
	}
	h.since = now
	s.add(h)
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.remove(h)
			s.mu.Unlock()
		})
	}, nil
}

// FailRenewals makes the next n renewals of name's holds fail, as if the
// store could not be reached: the grant is not extended in the store, and
// the holder, told nothing, loses its lease at its deadline on its own
// clock (LostUnreachable) unless a later renewal succeeds first, as on
// Redis. A renewed lease's renewals fall every third of its TTL, so n >= 2
// loses it (n = 1 does not). n = 0 clears what is left of an earlier call;
// a call replaces the count of the one before.
func (s *Service) FailRenewals(name string, n int) error {
	return s.count("fail renewals", s.faults.failRenewals, name, n)
}

// FailAcquires makes the next n Acquire calls of name (or of a MultiLock
// over it) fail at once with an error wrapping ErrUnreachable, taking
// nothing. n = 0 clears what is left of an earlier call.
func (s *Service) FailAcquires(name string, n int) error {
	return s.count("fail acquires", s.faults.failAcquires, name, n)
}

// count sets the count of a counted fault.
func (s *Service) count(op string, m map[string]int, name string, n int) error {
	if err := seam.CheckName(name); err != nil {
		return seam.Wrap(op, "", name, err)
	}
	if n < 0 {
		return seam.Wrap(op, "", name, fmt.Errorf("%w: count %d", dlock.ErrInvalidArgument, n))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == 0 {
		delete(m, name)
	} else {
		m[name] = n
	}
	return nil
}

// BlockAcquires makes the Service stop answering the acquisitions of name
// until unblock is called (idempotent): each waits, counted by
// AwaitWaiters, until then (and then goes on), until its ctx ends, or
// until its Wait runs out (dlock.ErrNotAcquired). Leases already held are
// not affected.
func (s *Service) BlockAcquires(name string) (unblock func(), err error) {
	if err := seam.CheckName(name); err != nil {
		return nil, seam.Wrap("block acquires", "", name, err)
	}
	s.mu.Lock()
	s.faults.blocked[name]++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			if s.faults.blocked[name]--; s.faults.blocked[name] == 0 {
				delete(s.faults.blocked, name)
			}
			s.changedLocked()
			s.mu.Unlock()
		})
	}, nil
}

// DelayGrants makes the next n grants of name reach their Acquire call d
// after the Service granted them, on the caller's clock (Advance moves it):
// the lock is held in the Service from the grant, and the lease counts
// from there, so the caller gets a lease with d less of it left. A grant
// that arrives after its lease ran out is given back and taken as a
// refusal (the caller tries again while its Wait allows, else gets
// dlock.ErrNotAcquired), as on Redis; a caller whose ctx ends first gives
// it back too. n = 0 clears what is left of an earlier call.
func (s *Service) DelayGrants(name string, n int, d time.Duration) error {
	if err := seam.CheckName(name); err != nil {
		return seam.Wrap("delay grants", "", name, err)
	}
	switch {
	case n < 0:
		return seam.Wrap("delay grants", "", name, fmt.Errorf("%w: count %d", dlock.ErrInvalidArgument, n))
	case n > 0 && d <= 0:
		return seam.Wrap("delay grants", "", name, fmt.Errorf("%w: delay %v", dlock.ErrInvalidDuration, d))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == 0 {
		delete(s.faults.delays, name)
	} else {
		s.faults.delays[name] = delay{n, d}
	}
	return nil
}

// delayFor uses up one delayed grant of any of names; 0: none.
func (f faults) delayFor(names []string) time.Duration {
	for _, n := range names {
		if dl, ok := f.delays[n]; ok {
			if dl.n--; dl.n == 0 {
				delete(f.delays, n)
			} else {
				f.delays[n] = dl
			}
			return dl.d
		}
	}
	return 0
}

// isBlocked reports whether any of names is blocked.
func (f faults) isBlocked(names []string) bool {
	for _, n := range names {
		if f.blocked[n] > 0 {
			return true
		}
	}
	return false
}
