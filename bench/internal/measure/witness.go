// Package measure holds what a benchmark run records: an overlap witness
// with handoff counting, wait-time statistics, Jain's fairness index and
// counter snapshots (Redis commands, CPU, allocations).
package measure

import "sync/atomic"

// Slot watches one lock name: it counts overlaps (an Enter while another
// holder is inside, which a correct lock never allows) and handoffs (an Enter
// by a different worker than the previous holder). Lock-free, so it adds no
// contention of its own to the lock under test. The zero value is not ready:
// use NewSlot.
type Slot struct {
	inside   atomic.Int32
	last     atomic.Int64 // worker of the previous Enter; -1: none yet
	overlaps atomic.Int64
	handoffs atomic.Int64
	entries  atomic.Int64
}

// NewSlot returns a Slot with no holder yet.
func NewSlot() *Slot {
	s := &Slot{}
	s.last.Store(-1)
	return s
}

// Enter records worker entering the critical section.
func (s *Slot) Enter(worker int) {
	if s.inside.Add(1) != 1 {
		s.overlaps.Add(1)
	}
	s.entries.Add(1)
	if prev := s.last.Swap(int64(worker)); prev >= 0 && prev != int64(worker) {
		s.handoffs.Add(1)
	}
}

// Exit records the holder leaving the critical section.
func (s *Slot) Exit() { s.inside.Add(-1) }

// Counts returns entries, overlaps and handoffs so far.
func (s *Slot) Counts() (entries, overlaps, handoffs int64) {
	return s.entries.Load(), s.overlaps.Load(), s.handoffs.Load()
}

// Reset zeroes the counts (between warm-up and the measured window); it
// keeps the last holder, so the first measured entry is judged correctly.
func (s *Slot) Reset() {
	s.entries.Store(0)
	s.overlaps.Store(0)
	s.handoffs.Store(0)
}
