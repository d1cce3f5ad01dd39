package witness

import (
	"fmt"
	"sync"
	"time"
)

// Lease is what History needs of a held lock: its loss signals.
type Lease interface {
	Done() <-chan struct{} // closed when the lock is lost
	Err() error            // non-nil once the lock is lost, on the holder's own clock
}

// Grant is one acquisition of the lock a History records.
type Grant struct {
	Who, Side string // the holder, and the side of a partition it is on
	Token     int64
	At        time.Time // when it was granted
	Lost      time.Time // when the holder was told it lost the lock; zero if it was not
}

// History records the grants of one lock in the order they were made, with
// an overlap witness over them, and checks what a lock must keep whatever
// the network does. It is safe for concurrent use; the zero value is ready.
type History struct {
	w      Witness
	mu     sync.Mutex
	grants []*Grant
}

const key = "lock"

// Granted records a grant to who (on side) with token, made now, and
// enters the witness.
func (h *History) Granted(who, side string, token int64) *Grant {
	g := &Grant{Who: who, Side: side, Token: token, At: time.Now()}
	h.w.Enter(key)
	h.mu.Lock()
	h.grants = append(h.grants, g)
	h.mu.Unlock()
	return g
}

// Left records that g's holder left its critical section now; lost says it
// left because it was told it lost the lock.
func (h *History) Left(g *Grant, lost bool) {
	now := time.Now()
	h.w.Exit(key)
	if lost {
		h.mu.Lock()
		g.Lost = now
		h.mu.Unlock()
	}
}

// Hold keeps g (held as l) until the holder is told it lost the lock (l's
// Done, or its Err on the holder's clock, polled every millisecond), d
// passes (0: no limit) or stop closes, then leaves the critical section.
// It returns whether the lock was lost.
func (h *History) Hold(g *Grant, l Lease, d time.Duration, stop <-chan struct{}) bool {
	var until <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		until = t.C
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-l.Done():
			h.Left(g, true)
			return true
		case <-tick.C:
			if l.Err() != nil {
				h.Left(g, true)
				return true
			}
		case <-until:
			h.Left(g, false)
			return false
		case <-stop:
			h.Left(g, false)
			return false
		}
	}
}

// Figures sums up a History.
type Figures struct {
	Grants   int
	BySide   map[string]int
	Overlaps int // double grants: a grant while another holder was inside
	// Losses counts the holds that were lost and then granted again;
	// MinMargin is the shortest time from such a loss signal to the next
	// grant (it must be > 0).
	Losses    int
	MinMargin time.Duration
	// LongestGap is the longest time between two grants.
	LongestGap time.Duration
}

func (f Figures) String() string {
	margin := "none"
	if f.Losses > 0 {
		margin = f.MinMargin.Round(time.Millisecond).String()
	}
	return fmt.Sprintf("%d grants %v, %d double grants, %d holds lost and granted again (smallest margin from the loss signal to the next grant: %s), longest time between grants %v",
		f.Grants, f.BySide, f.Overlaps, f.Losses, margin, f.LongestGap.Round(time.Millisecond))
}

// Check returns the figures and a description of every violation: an
// overlap, a token not above the one before it (in grant order), a grant
// made before the holder before it was told it lost the lock.
func (h *History) Check() (Figures, []error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := Figures{Grants: len(h.grants), BySide: map[string]int{}, Overlaps: h.w.Overlaps()}
	var errs []error
	if f.Overlaps != 0 {
		errs = append(errs, fmt.Errorf("%d double grants (overlapping holders) in %d grants", f.Overlaps, f.Grants))
	}
	for i, g := range h.grants {
		f.BySide[g.Side]++
		if i == 0 {
			continue
		}
		prev := h.grants[i-1]
		f.LongestGap = max(f.LongestGap, g.At.Sub(prev.At))
		if g.Token <= prev.Token {
			errs = append(errs, fmt.Errorf("grant %d (%s, %s side) has token %d after %d", i, g.Who, g.Side, g.Token, prev.Token))
		}
		if !prev.Lost.IsZero() {
			margin := g.At.Sub(prev.Lost)
			if margin <= 0 {
				errs = append(errs, fmt.Errorf("%s (%s side, token %d) was told it lost the lock %v after %s (%s side) was granted it",
					prev.Who, prev.Side, prev.Token, -margin, g.Who, g.Side))
			}
			if f.Losses == 0 || margin < f.MinMargin {
				f.MinMargin = margin
			}
			f.Losses++
		}
	}
	return f, errs
}

// Grants returns the grants recorded, in order.
func (h *History) Grants() []Grant {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]Grant, len(h.grants))
	for i, g := range h.grants {
		out[i] = *g
	}
	return out
}
