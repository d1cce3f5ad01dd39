package drill

import (
	"fmt"
	"html/template"
	"io"
)

// Span is one holder inside one lane (a lock or sku) from StartMS to EndMS.
type Span struct {
	Lane    string  `json:"lane"`
	Who     string  `json:"who"`
	StartMS float64 `json:"start_ms"`
	EndMS   float64 `json:"end_ms"`
	Bad     bool    `json:"bad,omitempty"` // overlapped another holder
	// LeaseEndMS is when the holder's lease ran out in Redis (0: it did not
	// run out while the drill watched, or the drill does not know).
	LeaseEndMS float64 `json:"lease_end_ms,omitempty"`
}

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

// Report is what an HTML report shows: the figures, a timeline with one row
// per holder (grouped by lane), marks, points and lease ends, enlarged
// windows of it, a wait-time histogram and the drill's event log.
type Report struct {
	Title     string
	Spans     []Span
	Marks     []Mark
	Points    []Point
	Zooms     []Window
	Histogram []Bucket
	Figures   [][2]string // name, value, in order
	Events    []Event     // the drill's log, shown as a table
}

// WriteHTML writes r as one self-contained HTML page (inline SVG, no
// scripts, nothing fetched from the network).
func (r *Report) WriteHTML(w io.Writer) error {
	page := struct {
		*Report
		Timeline  template.HTML
		Zoomed    []zoomed
		Histogram template.HTML
		Key       struct{ Stale, Overlap, Expiry bool }
	}{Report: r}
	ov := overlaps(r.Spans)
	for _, sp := range r.Spans {
		page.Key.Expiry = page.Key.Expiry || sp.LeaseEndMS > 0
		page.Key.Stale = page.Key.Stale || sp.LeaseEndMS > sp.StartMS && sp.LeaseEndMS < sp.EndMS
		page.Key.Overlap = page.Key.Overlap || sp.Bad || len(ov[spanKey(sp)]) > 0
	}
	if len(r.Spans) > 0 {
		page.Timeline = timelineSVG(r, "t", 0, 0)
		for i, z := range r.Zooms {
			if z.ToMS > z.FromMS {
				page.Zoomed = append(page.Zoomed, zoomed{z.Title, timelineSVG(r, fmt.Sprintf("z%d", i), z.FromMS, z.ToMS)})
			}
		}
	}
	if len(r.Histogram) > 0 {
		page.Histogram = histogramSVG(r.Histogram)
	}
	return reportPage.Execute(w, page)
}

type zoomed struct {
	Title string
	SVG   template.HTML
}

var reportPage = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1040px}
h1{font-size:20px} h2{font-size:16px;margin-top:28px} table{border-collapse:collapse}
td,th{padding:2px 12px 2px 0;text-align:left;vertical-align:top} td:first-child{color:#555}
.log td:first-child{text-align:right;font-variant-numeric:tabular-nums}
svg text{font-family:system-ui,sans-serif}
.key span{display:inline-block;width:14px;height:10px;margin:0 4px 0 14px;vertical-align:middle}
</style></head><body>
<h1>{{.Title}}</h1>
<table>{{range .Figures}}<tr><td>{{index . 0}}</td><td><b>{{index . 1}}</b></td></tr>{{end}}</table>
{{if .Timeline}}<h2>Who held the lock, over time</h2>
{{.Timeline}}
<p class="key"><span style="background:#3a7bd5"></span>holds the lock
{{if .Key.Stale}}<span style="background:repeating-linear-gradient(45deg,#3a7bd5 0 3px,#cfdcf3 3px 6px)"></span>still at work after its lease ran out{{end}}
{{if .Key.Overlap}}<span style="background:#d33"></span>another holder of the same lock is inside too (a double grant){{end}}<br>
{{if .Key.Expiry}}<span style="border-left:2px dashed #900;height:14px;width:0"></span>its lease runs out in Redis{{end}}
{{if .Points}}<span style="background:#222;width:8px;height:8px;transform:rotate(45deg)"></span>what it did{{end}}
{{if .Marks}}<span style="background:#e80;width:2px"></span>an event{{end}}</p>
{{range .Zoomed}}<h2>{{.Title}}</h2>
{{.SVG}}{{end}}{{end}}
{{if .Histogram}}<h2>How long each acquisition waited</h2>
{{.Histogram}}{{end}}
{{if .Events}}<h2>What happened</h2>
<table class="log"><tr><th>ms</th><th>who</th><th>what</th></tr>
{{range .Events}}<tr><td>{{printf "%.1f" .AtMS}}</td><td>{{.Who}}</td><td>{{.What}}</td></tr>{{end}}</table>{{end}}
</body></html>
`))

// leaseEnds sets LeaseEndMS of the first span of who in lane to its start
// plus lease: when a lease taken at the span's start ran out.
func leaseEnds(spans []Span, lane, who string, lease float64) {
	for i := range spans {
		if spans[i].Lane == lane && spans[i].Who == who {
			spans[i].LeaseEndMS = spans[i].StartMS + lease
			return
		}
	}
}
