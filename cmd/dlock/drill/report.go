package drill

import (
	"fmt"
	"html/template"
	"io"
	"sort"
)

// Span is one holder inside one lane (a lock or sku) from StartMS to EndMS.
type Span struct {
	Lane    string  `json:"lane"`
	Who     string  `json:"who"`
	StartMS float64 `json:"start_ms"`
	EndMS   float64 `json:"end_ms"`
	Bad     bool    `json:"bad,omitempty"` // overlapped another holder
}

// Mark is a moment worth pointing at (a kill, a pause, a promotion).
type Mark struct {
	AtMS  float64 `json:"at_ms"`
	Label string  `json:"label"`
}

// Report is what an HTML report shows: a timeline of holders per lane, marks,
// a wait-time histogram and the figures.
type Report struct {
	Title     string
	Spans     []Span
	Marks     []Mark
	Histogram []Bucket
	Figures   [][2]string // name, value, in order
}

// WriteHTML writes r as one self-contained HTML page (inline SVG, no
// scripts, nothing fetched from the network).
func (r *Report) WriteHTML(w io.Writer) error {
	return reportPage.Execute(w, r.layout())
}

const (
	svgWidth  = 960.0
	laneH     = 26.0
	labelW    = 120.0
	maxLanes  = 60
	histH     = 160.0
	histBarW  = 48.0
	histSpace = 8.0
)

type laidSpan struct {
	X, Y, W  float64
	Who, Tip string
	Bad      bool
}
type laidMark struct {
	X     float64
	Label string
}
type laidBar struct {
	X, Y, H float64
	Label   string
	Count   int
}
type layout struct {
	Title          string
	Lanes          []laneLabel
	Spans          []laidSpan
	Marks          []laidMark
	Height, Width  float64
	Bars           []laidBar
	HistW, HistH   float64
	Figures        [][2]string
	MoreLanes      int
	EndMS          float64
	HasHist, HasTL bool
}
type laneLabel struct {
	Y    float64
	Name string
}

func (r *Report) layout() layout {
	l := layout{Title: r.Title, Figures: r.Figures, Width: svgWidth}
	lanes := map[string]int{}
	var names []string
	for _, s := range r.Spans {
		if _, ok := lanes[s.Lane]; !ok {
			lanes[s.Lane] = len(names)
			names = append(names, s.Lane)
		}
		l.EndMS = max(l.EndMS, s.EndMS)
	}
	for _, m := range r.Marks {
		l.EndMS = max(l.EndMS, m.AtMS)
	}
	if len(names) > maxLanes {
		l.MoreLanes = len(names) - maxLanes
		names = names[:maxLanes]
	}
	scale := (svgWidth - labelW - 10) / max(l.EndMS, 1)
	for i, n := range names {
		l.Lanes = append(l.Lanes, laneLabel{Y: float64(i)*laneH + 30 + laneH*0.7, Name: n})
	}
	whos := map[string]int{} // each holder its own row inside a lane, so overlaps show
	for _, s := range r.Spans {
		i := lanes[s.Lane]
		if i >= maxLanes {
			continue
		}
		if _, ok := whos[s.Who]; !ok {
			whos[s.Who] = len(whos)
		}
		l.Spans = append(l.Spans, laidSpan{
			X: labelW + s.StartMS*scale, Y: float64(i)*laneH + 30 + float64(whos[s.Who]%3)*7, W: max((s.EndMS-s.StartMS)*scale, 1),
			Who: s.Who, Bad: s.Bad,
			Tip: fmt.Sprintf("%s on %s: %.1f – %.1f ms", s.Who, s.Lane, s.StartMS, s.EndMS),
		})
	}
	sort.Slice(r.Marks, func(i, j int) bool { return r.Marks[i].AtMS < r.Marks[j].AtMS })
	for _, m := range r.Marks {
		l.Marks = append(l.Marks, laidMark{X: labelW + m.AtMS*scale, Label: m.Label})
	}
	l.Height = float64(len(names))*laneH + 50
	l.HasTL = len(r.Spans) > 0
	most := 1
	for _, b := range r.Histogram {
		most = max(most, b.Count)
	}
	for i, b := range r.Histogram {
		h := float64(b.Count) / float64(most) * (histH - 40)
		l.Bars = append(l.Bars, laidBar{
			X: 10 + float64(i)*(histBarW+histSpace), Y: histH - 25 - h, H: h, Count: b.Count,
			Label: fmt.Sprintf("≤%g", b.HiMS),
		})
	}
	l.HistW = 20 + float64(len(r.Histogram))*(histBarW+histSpace)
	l.HistH = histH
	l.HasHist = len(r.Histogram) > 0
	return l
}

var reportPage = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px} table{border-collapse:collapse} td{padding:2px 12px 2px 0}
td:first-child{color:#555} .bad{fill:#d33} .ok{fill:#3a7bd5} .mark{stroke:#e80;stroke-width:2}
text{font-size:11px;fill:#333}
</style></head><body>
<h1>{{.Title}}</h1>
<table>{{range .Figures}}<tr><td>{{index . 0}}</td><td><b>{{index . 1}}</b></td></tr>{{end}}</table>
{{if .HasTL}}<h2>Who held the lock, over time (ms)</h2>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.Width}}" height="{{.Height}}">
{{range .Lanes}}<text x="4" y="{{.Y}}">{{.Name}}</text>{{end}}
{{range .Spans}}<rect x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="9" class="{{if .Bad}}bad{{else}}ok{{end}}"><title>{{.Tip}}</title></rect>{{if gt .W 30.0}}<text x="{{.X}}" y="{{.Y}}" dx="2" dy="8" style="font-size:8px;fill:#fff">{{.Who}}</text>{{end}}{{end}}
{{range .Marks}}<line x1="{{.X}}" x2="{{.X}}" y1="14" y2="{{$.Height}}" class="mark"/><text x="{{.X}}" y="12">{{.Label}}</text>{{end}}
<text x="120" y="{{.Height}}">0</text><text x="{{.Width}}" y="{{.Height}}" text-anchor="end">{{printf "%.0f" .EndMS}} ms</text>
</svg>
{{if .MoreLanes}}<p>({{.MoreLanes}} more lanes not drawn)</p>{{end}}
<p>Blue: one holder. Red: a holder that overlapped another (a double grant).</p>{{end}}
{{if .HasHist}}<h2>Wait time (ms)</h2>
<svg xmlns="http://www.w3.org/2000/svg" width="{{.HistW}}" height="{{.HistH}}">
{{range .Bars}}<rect x="{{.X}}" y="{{.Y}}" width="48" height="{{.H}}" class="ok"/><text x="{{.X}}" y="{{$.HistH}}" dy="-10">{{.Label}}</text><text x="{{.X}}" y="{{.Y}}" dy="-2">{{.Count}}</text>{{end}}
</svg>{{end}}
</body></html>
`))
