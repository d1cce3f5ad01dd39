package dlockotel

import (
	"sync"
	"sync/atomic"
	"time"
)

// holdKey identifies one hold (one grant) in the events: its fencing token
// is unique to the grant of that lock and shared by the owner's reentrant
// Leases. It is kept in memory only, never recorded.
type holdKey struct {
	shape, name string
	token       int64
}

// slowHolds counts each hold that exceeds the threshold once: while it is
// still held when the watchdog renews it past the threshold, otherwise when
// it ends (the last Unlock of the hold, or its loss).
//
// Only renewals mark a hold, and a backend reports every renewal of a hold
// before the event that ends it, so the set holds live holds only and is
// emptied as they end.
type slowHolds struct {
	after time.Duration // 0: off

	n      atomic.Int64 // len(marked), read without the lock on the common path
	mu     sync.Mutex
	marked map[holdKey]struct{}
}

// renewed handles a renewal of a live hold held for held; it reports
// whether this call found the hold slow for the first time.
func (s *slowHolds) renewed(k holdKey, held time.Duration) bool {
	if s.after <= 0 || held < s.after {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.marked[k]; ok {
		return false
	}
	if s.marked == nil {
		s.marked = make(map[holdKey]struct{})
	}
	s.marked[k] = struct{}{}
	s.n.Add(1)
	return true
}

// ended handles the end of a hold held for held (check: whether this end
// event may count it); it reports whether the hold is slow and was not
// counted before.
func (s *slowHolds) ended(k holdKey, held time.Duration, check bool) bool {
	counted := false
	if s.n.Load() > 0 {
		s.mu.Lock()
		if _, ok := s.marked[k]; ok {
			counted = true
			delete(s.marked, k)
			s.n.Add(-1)
		}
		s.mu.Unlock()
	}
	return check && !counted && s.after > 0 && held >= s.after
}
