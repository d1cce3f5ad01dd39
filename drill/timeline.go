package drill

import (
	"sync"
	"time"
)

// Timeline records who did what when, on one monotonic clock.
type Timeline struct {
	start  time.Time
	mu     sync.Mutex
	events []Event
}

// Event is one line of a Timeline.
type Event struct {
	AtMS float64 `json:"at_ms"`
	Who  string  `json:"who"`
	What string  `json:"what"`
}

// NewTimeline starts a timeline now.
func NewTimeline() *Timeline { return &Timeline{start: time.Now()} }

// Since returns the time since the timeline started.
func (t *Timeline) Since() time.Duration { return time.Since(t.start) }

// Add records an event now and returns its offset.
func (t *Timeline) Add(who, what string) time.Duration {
	at := time.Since(t.start)
	t.mu.Lock()
	t.events = append(t.events, Event{AtMS: msf(at), Who: who, What: what})
	t.mu.Unlock()
	return at
}

// Events returns a copy of the events in order.
func (t *Timeline) Events() []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]Event(nil), t.events...)
}

func msf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
