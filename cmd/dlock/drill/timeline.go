package drill

import (
	"sync"
	"time"
)

// Timeline records a drill's history on one monotonic clock: what each
// actor did (events) and when each holder entered and left a lane, a lock
// or a sku (spans). It is the drill's witness: whatever a drill says about
// who was inside when is read from the spans it recorded (see witness.go),
// never from what the drill meant to happen. It is safe for concurrent use.
type Timeline struct {
	start  time.Time
	mu     sync.Mutex
	events []Event
	spans  []Span
	open   []bool
	points []Point
}

// history is what a drill's Timeline recorded, as its result carries it:
// the spans (the witness, in the JSON) and the points drawn in the report.
type history struct {
	Spans  []Span `json:"spans"`
	points []Point
}

// Event is one line of a Timeline.
type Event struct {
	AtMS float64 `json:"at_ms"`
	Who  string  `json:"who"`
	What string  `json:"what"`
	// Span, when not 0, is 1 + the index of the span this event opened,
	// among the spans of the same result: the renderers add who else was
	// inside at that moment, read from the spans.
	Span int `json:"span,omitempty"`
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

// Begin records s.Who entering s.Lane now (s's times are set here) and
// returns the span's index for End.
func (t *Timeline) Begin(s Span) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.begin(s)
}

func (t *Timeline) begin(s Span) int {
	s.StartMS = msf(time.Since(t.start))
	s.EndMS = s.StartMS
	t.spans = append(t.spans, s)
	t.open = append(t.open, true)
	return len(t.spans) - 1
}

// Enter records who entering lane now and, at the same moment, the event
// what; the renderers say who else was inside then. It returns the span's
// index for End.
func (t *Timeline) Enter(lane, who, what string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := t.begin(Span{Lane: lane, Who: who})
	t.events = append(t.events, Event{AtMS: t.spans[i].StartMS, Who: who, What: what, Span: i + 1})
	return i
}

// End records the holder of span i leaving now; a span ends once (a later
// End changes nothing).
func (t *Timeline) End(i int) { t.EndAt(i, time.Since(t.start)) }

// EndAt records the holder of span i leaving at the offset at (an earlier
// moment the caller read from Since: the last time it saw its lease held);
// a span ends once.
func (t *Timeline) EndAt(i int, offset time.Duration) {
	at := msf(offset)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open[i] {
		t.spans[i].EndMS, t.open[i] = at, false
	}
}

// Held returns the spans open now.
func (t *Timeline) Held() []Span {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Span
	for i, s := range t.spans {
		if t.open[i] {
			out = append(out, s)
		}
	}
	return out
}

// Spans returns the spans in the order they began (open ones end now),
// each marked Bad when another holder of its lane was inside at the same
// time.
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
	markOverlaps(out)
	return out
}

// Point records that who did label at the offset at, drawn on who's row
// of lane in the report.
func (t *Timeline) Point(lane, who, label string, at time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.points = append(t.points, Point{Lane: lane, Who: who, AtMS: msf(at), Label: label})
}

// history returns the spans (see Spans) and the points recorded so far.
func (t *Timeline) history() history {
	h := history{Spans: t.Spans()}
	t.mu.Lock()
	h.points = append([]Point(nil), t.points...)
	t.mu.Unlock()
	return h
}
