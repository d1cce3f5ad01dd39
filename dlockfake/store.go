package dlockfake

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// The Service's store: who holds each name, who waits for it, in arrival
// order. Every shape of one name shares it (a Mutex and a Lock of the same
// name exclude each other; Redis refuses the second shape with
// ErrWrongType, etcd and ZooKeeper keep them apart). Leases end in the
// store at their time on the Service's clock, checked whenever the name
// is looked at. Everything here runs under Service.mu.

// entry is one name in the store.
type entry struct {
	holds   []*holding
	waiting []*acquisition // queued, in arrival order
}

// holding is one grant in the store: one holder of one lock (of every name
// of a MultiLock).
type holding struct {
	req    *request
	client *Client // nil: another process's (Take)
	id     string  // Lease.ID: the owner of a reentrant lock, else an id of its own
	owner  string  // a reentrant lock's owner; "" otherwise
	token  int64
	count  int       // acquisitions of its owner not yet released (re-entries)
	since  time.Time // granted at, on the Service's clock
	until  time.Time // the store gives it up then; zero: never (another process's)
	cap    time.Time // MaxHold's end, once its Lease is made; zero: none
	gone   bool      // released, expired, lost or taken
	hold   *seam.Hold[*grantOps]
}

// end returns when the store gives h up (zero: never).
func (h *holding) end() time.Time {
	if h.until.IsZero() || !h.cap.IsZero() && h.cap.Before(h.until) {
		return h.cap
	}
	return h.until
}

// expired reports whether h's time ran out by now.
func (h *holding) expired(now time.Time) bool {
	end := h.end()
	return !end.IsZero() && !now.Before(end)
}

// live returns name's holds, dropping those whose time ran out.
func (s *Service) live(name string, now time.Time) []*holding {
	e := s.names[name]
	if e == nil {
		return nil
	}
	var ended []*holding
	for _, h := range e.holds {
		if h.expired(now) {
			ended = append(ended, h)
		}
	}
	for _, h := range ended {
		s.remove(h)
	}
	return e.holds
}

// alive reports whether h is still in the store at now.
func (s *Service) alive(h *holding, now time.Time) bool {
	if !h.gone && h.expired(now) {
		s.remove(h)
	}
	return !h.gone
}

// remove takes h out of the store, from every name of it.
func (s *Service) remove(h *holding) {
	if h.gone {
		return
	}
	h.gone = true
	for _, n := range h.req.names {
		e := s.names[n]
		e.holds = slices.DeleteFunc(e.holds, func(x *holding) bool { return x == h })
		s.tidy(n)
	}
	s.changedLocked()
}

// tidy forgets name's entry once nobody holds or waits for it.
func (s *Service) tidy(name string) {
	if e := s.names[name]; e != nil && len(e.holds) == 0 && len(e.waiting) == 0 {
		delete(s.names, name)
	}
}

func (s *Service) entry(name string) *entry {
	e := s.names[name]
	if e == nil {
		e = &entry{}
		s.names[name] = e
	}
	return e
}

// add puts h in the store under a new token.
func (s *Service) add(h *holding) {
	s.last++
	h.token = s.last
	for _, n := range h.req.names {
		e := s.entry(n)
		e.holds = append(e.holds, h)
		s.fences[n] = h.token
	}
	s.changedLocked()
}

// refusal is why an attempt was not granted: err refuses it for good;
// otherwise it may wait, until wake (a holder in its way runs out; zero:
// until something changes).
type refusal struct {
	err  error
	wake time.Time
}

// try grants a's request if nothing holds or waits before it in its way:
// a new holding, or the owner's own (a re-entry, counted). a.ticket is
// its place in the queue (0: not queued, behind everyone).
func (s *Service) try(a *acquisition, now time.Time) (*holding, refusal) {
	r := a.req
	if r.mode == seam.Permit {
		if err := s.checkCount(a); err != nil {
			return nil, refusal{err: err}
		}
	}
	if h, err := s.own(a, now); h != nil || err != nil {
		if h != nil {
			h.count++
			if u := now.Add(a.ttl()); u.After(h.until) {
				h.until = u
			}
		}
		return h, refusal{err: err}
	}
	var wake time.Time
	blocked := false
	for _, n := range r.names {
		hs := s.live(n, now)
		m := r.mode
		if slices.ContainsFunc(hs, a.downgrades) {
			m = seam.Downgrade // at once: no writer gets in between
		}
		ad := seam.Admit(m, a.want)
		for _, h := range hs {
			if ad.See(seam.Other{Mode: h.req.mode, Ahead: true}) {
				wake = earliest(wake, h.end())
			}
		}
		if e := s.names[n]; e != nil {
			for _, w := range e.waiting {
				if a.ticket != 0 && w.ticket >= a.ticket || w.lapsed(now) { // behind, or silent: it blocks nobody
					continue
				}
				if ad.See(seam.Other{Mode: w.req.mode, Ahead: true}) {
					wake = earliest(wake, w.place)
				}
			}
		}
		blocked = blocked || !ad.Granted()
	}
	if blocked {
		return nil, refusal{wake: wake}
	}
	h := &holding{req: r, client: a.c, id: a.id, owner: a.owner, count: 1, since: now, until: now.Add(a.ttl())}
	s.add(h)
	return h, refusal{}
}

// own returns the holding a re-enters (its owner's, of the same lock,
// through the same Client), or why its owner cannot have it: it holds a
// name of it through another lock (the read side of the RWLock it wants
// to write: ErrUpgrade; another lock: it would wait for itself).
func (s *Service) own(a *acquisition, now time.Time) (*holding, error) {
	r := a.req
	if r.family == "" {
		return nil, nil
	}
	var other *holding
	for _, n := range r.names {
		for _, h := range s.live(n, now) {
			if h.client != a.c || h.owner != a.owner {
				continue
			}
			if h.req.family == r.family {
				return h, nil
			}
			if !a.downgrades(h) {
				other = h
			}
		}
	}
	switch {
	case other == nil:
		return nil, nil
	case r.shape == "rw_write" && other.req.shape == "rw_read":
		return nil, fmt.Errorf("%w (unlock the read side first)", dlock.ErrUpgrade)
	}
	return nil, fmt.Errorf("%w: the owner holds %q through a %s: taking it through a %s would wait for itself",
		dlock.ErrInvalidArgument, other.req.name, other.req.shape, r.shape)
}

// downgrades reports whether h, held by a's owner, lets a in beside it: a
// read side taken by the owner of the write side.
func (a *acquisition) downgrades(h *holding) bool {
	return a.req.shape == "rw_read" && h.req.shape == "rw_write" && h.client == a.c && h.owner == a.owner
}

// checkCount compares a Semaphore's count with the one the store keeps,
// setting it if there is none.
func (s *Service) checkCount(a *acquisition) error {
	name := a.req.names[0]
	n, ok := s.counts[name]
	switch {
	case !ok:
		s.counts[name] = a.want
	case n == a.want:
	case a.req.permits.Accepts(n): // its own SetPermits changed it
		a.want = n
	default:
		return seam.PermitsMismatch(strconv.Itoa(n), a.want)
	}
	return nil
}

// release gives up one acquisition of h.
func (s *Service) release(h *holding, now time.Time) seam.Released {
	switch {
	case !s.alive(h, now):
		return seam.ReleasedNotOurs
	case h.count > 1:
		h.count--
		return seam.ReleasedStillHeld
	}
	s.remove(h)
	return seam.ReleasedFree
}

// extend keeps h for ttl from now (its cap still ends it); false if it is
// gone.
func (s *Service) extend(h *holding, ttl time.Duration, now time.Time) bool {
	if !s.alive(h, now) {
		return false
	}
	h.until = now.Add(ttl)
	return true
}

// earliest returns the earlier of a and b, a zero time being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}
