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
	spans  []Span
	open   []bool
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

// Begin records who entering lane now and returns the span's index for End.
func (t *Timeline) Begin(lane, who string) int {
	at := msf(time.Since(t.start))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.spans = append(t.spans, Span{Lane: lane, Who: who, StartMS: at, EndMS: at})
	t.open = append(t.open, true)
	return len(t.spans) - 1
}

// End records the span i's holder leaving now.
func (t *Timeline) End(i int) {
	at := msf(time.Since(t.start))
	t.mu.Lock()
	defer t.mu.Unlock()
	t.spans[i].EndMS, t.open[i] = at, false
}

// Spans returns the spans (open ones end now), each marked Bad when it
// overlapped another span of its lane.
func (t *Timeline) Spans() []Span {
	now := msf(time.Since(t.start))
	t.mu.Lock()
	out := append([]Span(nil), t.spans...)
	for i := range out {
		if t.open[i] {
			out[i].EndMS = now
		}
	}
	t.mu.Unlock()
	for i := range out {
		for j := range out {
			if i != j && out[i].Lane == out[j].Lane && out[i].StartMS < out[j].EndMS && out[j].StartMS < out[i].EndMS {
				out[i].Bad = true
			}
		}
	}
	return out
}
