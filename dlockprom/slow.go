package dlockprom

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSlowHold is the hold time past which a hold is reported slow
// (002 §4.1 alerts when a critical section runs longer than 3 s).
const DefaultSlowHold = 3 * time.Second

// holdKey identifies one hold (one grant) of a lock: its fencing token is
// unique to the grant and shared by the owner's reentrant Leases.
type holdKey struct {
	shape, name string
	token       int64
}

// slowHolds reports each hold that exceeds the threshold once: while it is
// still held when the watchdog renews it past the threshold, otherwise when
// it ends (the last Unlock of the hold, or its loss).
//
// Only renewals mark a hold as warned, and the engine reports every renewal
// of a hold before the event that ends it (the last Unlock or the loss), so
// the set holds only live holds and is emptied as they end.
type slowHolds struct {
	after  time.Duration // 0: disabled
	logger *slog.Logger  // nil: count only
	host   string
	pid    int

	n      atomic.Int64 // len(warned), read without the lock on the hot path
	mu     sync.Mutex
	warned map[holdKey]struct{}
}

// slowState says where the hold was when it was found slow.
type slowState string

const (
	stillHeld slowState = "held"
	released  slowState = "released"
	lost      slowState = "lost"
)

// renewed handles a renewal of a live hold; it reports whether this call
// found the hold slow for the first time.
func (s *slowHolds) renewed(k holdKey, held time.Duration) bool {
	if s.after <= 0 || held < s.after {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.warned[k]; ok {
		return false
	}
	s.warned[k] = struct{}{}
	s.n.Add(1)
	return true
}

// ended handles the end of a hold (check: whether this end event may report
// it); it reports whether the hold is slow and was not reported before.
func (s *slowHolds) ended(k holdKey, held time.Duration, check bool) bool {
	warned := false
	if s.n.Load() > 0 {
		s.mu.Lock()
		if _, ok := s.warned[k]; ok {
			warned = true
			delete(s.warned, k)
			s.n.Add(-1)
		}
		s.mu.Unlock()
	}
	return check && !warned && s.after > 0 && held >= s.after
}

// log writes the warning.
func (s *slowHolds) log(shape, group, name string, token int64, held time.Duration, renewals int, state slowState) {
	if s.logger == nil {
		return
	}
	s.logger.LogAttrs(context.Background(), slog.LevelWarn, "dlock: slow hold",
		slog.String("name", name), slog.String("shape", shape), slog.String("group", group),
		slog.Int64("token", token), slog.Duration("held", held), slog.Duration("threshold", s.after),
		slog.Int("renewals", renewals), slog.String("state", string(state)),
		slog.String("host", s.host), slog.Int("pid", s.pid))
}
