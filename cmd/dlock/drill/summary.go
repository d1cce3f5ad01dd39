package drill

import (
	"fmt"
	"io"
	"strings"

	"github.com/dlockgo/dlock/cmd/dlock/table"
)

// Summary is a drill's result as people read it: its one rendering, drawn
// as text by WriteText and as an HTML page by WriteHTML, so that a figure
// or a line cannot read one way in the text and another in the report.
// Every result's Summary method builds it from the result's figures and
// recorded history; what it says about who was inside when comes from the
// spans (witness.go).
type Summary struct {
	// Title says what ran, with its settings: the first line.
	Title string
	// Parts are what happened, part by part of the drill.
	Parts []Part
	// Histogram is a wait-time distribution, drawn as bars.
	Histogram []Bucket
	// Tables are the per-run or per-strategy figures.
	Tables []table.Table
	// Figures are what was measured, in order.
	Figures []Figure
	// Notes are lines after the figures (what was left behind, what went
	// wrong).
	Notes []string

	// The timeline, drawn in the HTML report only: who held which lane
	// when (one row per holder, grouped by lane), moments worth pointing
	// at, what a holder did, and stretches enlarged below it.
	TimelineTitle string
	Spans         []Span
	Marks         []Mark
	Points        []Point
	Zooms         []Window
	// Lanes orders the timeline's lane groups (lanes it does not name
	// follow, in order of appearance); nil: in order of appearance.
	Lanes []string
	// Gaps are stretches whose spans were left out of the timeline: each
	// is drawn as such, not left blank.
	Gaps []Window
	// Axis is the title of the time axis ("": time since the drill
	// started).
	Axis string
	// Outside says the spans were read from outside the holders (their
	// ends are bounds, dlock top): overlaps are not drawn, since they
	// would not be witnessed.
	Outside bool
}

// Part is one part of a drill's story: a heading ("" for none) and the
// events, in order. An event that opened a span (Event.Span) is shown with
// who else was inside then, read from the Summary's spans.
type Part struct {
	Title  string
	Events []Event
}

// Figure is one measured figure.
type Figure struct{ Name, Value string }

// Mark is a moment worth pointing at (a kill, a pause, a promotion).
type Mark struct {
	AtMS  float64 `json:"at_ms"`
	Label string  `json:"label"`
}

// Point is something one holder did at one moment (a write, a DEL, an
// Unlock), drawn on that holder's row of the timeline.
type Point struct {
	Lane  string  `json:"lane"`
	Who   string  `json:"who"`
	AtMS  float64 `json:"at_ms"`
	Label string  `json:"label"`
}

// Window is a stretch of the timeline drawn again, enlarged, below it:
// for events too close together to tell apart at the full scale.
type Window struct {
	Title        string
	FromMS, ToMS float64
}

// WriteText writes s for people: the title, each part's events, the
// histogram, the tables, the figures and the notes, a blank line between
// blocks.
func (s *Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	block := func() {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
	}
	if s.Title != "" {
		b.WriteString(s.Title + "\n")
	}
	for _, p := range s.Parts {
		block()
		if p.Title != "" {
			b.WriteString(p.Title + ":\n")
		}
		for _, e := range p.Events {
			fmt.Fprintf(&b, "  %8.1f ms  %-3s %s\n", e.AtMS, e.Who, eventText(e, s.Spans))
		}
	}
	if len(s.Histogram) > 0 {
		block()
		writeHistogram(&b, s.Histogram)
	}
	for _, t := range s.Tables {
		block()
		_ = t.Write(&b)
	}
	if len(s.Figures) > 0 {
		block()
		_ = s.figureTable().Write(&b)
	}
	if len(s.Notes) > 0 {
		block()
		for _, n := range s.Notes {
			b.WriteString(n + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// figureTable lays the figures out as a two-column table.
func (s *Summary) figureTable() table.Table {
	var t table.Table
	for _, f := range s.Figures {
		t.Rows = append(t.Rows, []string{f.Name, f.Value})
	}
	return t
}

// writeHistogram draws the buckets as bars of text.
func writeHistogram(w io.Writer, bs []Bucket) {
	most := 1
	for _, b := range bs {
		most = max(most, b.Count)
	}
	for _, b := range bs {
		bar := strings.Repeat("█", (b.Count*40+most-1)/most)
		fmt.Fprintf(w, "  %7.1f – %7.1f ms │%-40s %d\n", b.LoMS, b.HiMS, bar, b.Count)
	}
}
