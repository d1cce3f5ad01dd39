package top

import (
	"html/template"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/drill"
)

// Timeline draws the holds of the view's history, one lane per lock name
// and one row per holder, over the history kept (at most the time since
// the view started), with the drills' timeline: a hold still open runs to
// now, an expiry is a point where it ended.
func (v View) Timeline() template.HTML {
	if len(v.spans) == 0 {
		return ""
	}
	now := msSince(v.start, v.At)
	from := max(0, now-float64(v.keep.Milliseconds()))
	// The view is no witness: its ends are bounds read between readings,
	// so it draws no overlap as one.
	s := &drill.Summary{Axis: "time since dlock top started (ms)", Outside: true}
	for _, sp := range v.spans {
		end := now
		if !sp.to.IsZero() {
			end = msSince(v.start, sp.to)
		}
		d := drill.Span{Lane: sp.key.name, Who: sp.who, StartMS: max(from, msSince(v.start, sp.from)), EndMS: end, Token: sp.key.fence}
		s.Spans = append(s.Spans, d)
		if sp.expired {
			s.Points = append(s.Points, drill.Point{Lane: d.Lane, Who: d.Who, AtMS: end, Label: "expired"})
		}
	}
	return s.Timeline("top", from, max(now, from+1000))
}

// msSince returns t's offset from start in ms.
func msSince(start, t time.Time) float64 { return float64(t.Sub(start).Microseconds()) / 1000 }
