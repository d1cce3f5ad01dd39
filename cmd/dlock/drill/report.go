package drill

import (
	"fmt"
	"html/template"
	"io"

	"github.com/dlockgo/dlock/cmd/dlock/table"
)

// WriteHTML writes s as one self-contained HTML page (inline SVG, no
// scripts, nothing fetched from the network): the title, the figures, the
// tables, the timeline and its enlarged windows, the histogram, each
// part's events and the notes.
func (s *Summary) WriteHTML(w io.Writer) error {
	page := struct {
		*Summary
		Figures   table.Table
		Tables    []htmlTable
		Parts     []htmlPart
		Timeline  template.HTML
		Zoomed    []zoomed
		Histogram template.HTML
		Key       struct{ Stale, Overlap, Expiry bool }
	}{Summary: s, Figures: s.figureTable()}
	for _, t := range s.Tables {
		page.Tables = append(page.Tables, htmlTable{t, t.RightAligned()})
	}
	for _, p := range s.Parts {
		hp := htmlPart{Title: p.Title}
		for _, e := range p.Events {
			hp.Lines = append(hp.Lines, Event{AtMS: e.AtMS, Who: e.Who, What: eventText(e, s.Spans)})
		}
		page.Parts = append(page.Parts, hp)
	}
	ov := overlaps(s.Spans)
	for _, sp := range s.Spans {
		page.Key.Expiry = page.Key.Expiry || sp.LeaseEndMS > 0
		page.Key.Stale = page.Key.Stale || sp.LeaseEndMS > sp.StartMS && sp.LeaseEndMS < sp.EndMS
		page.Key.Overlap = page.Key.Overlap || sp.Bad || len(ov[spanKey(sp)]) > 0
	}
	if len(s.Spans) > 0 {
		page.Timeline = timelineSVG(s, "t", 0, 0)
		for i, z := range s.Zooms {
			if z.ToMS > z.FromMS {
				page.Zoomed = append(page.Zoomed, zoomed{z.Title, timelineSVG(s, fmt.Sprintf("z%d", i), z.FromMS, z.ToMS)})
			}
		}
	}
	if len(s.Histogram) > 0 {
		page.Histogram = histogramSVG(s.Histogram)
	}
	return reportPage.Execute(w, page)
}

// htmlTable is a table with its columns' alignment.
type htmlTable struct {
	table.Table
	Right []bool
}

// htmlPart is a part with its lines as the text shows them.
type htmlPart struct {
	Title string
	Lines []Event
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
td,th{padding:2px 12px 2px 0;text-align:left;vertical-align:top} .figures td:first-child{color:#555}
.grid th,.grid td{padding:2px 8px} .grid tr:nth-child(even){background:#f4f5f7} .num{text-align:right;font-variant-numeric:tabular-nums}
.log th[colspan]{padding-top:10px}
.log td:first-child{text-align:right;font-variant-numeric:tabular-nums}
svg text{font-family:system-ui,sans-serif}
.key span{display:inline-block;width:14px;height:10px;margin:0 4px 0 14px;vertical-align:middle}
</style></head><body>
<h1>{{.Title}}</h1>
<table class="figures">{{range .Figures.Rows}}<tr><td>{{index . 0}}</td><td><b>{{index . 1}}</b></td></tr>{{end}}</table>
{{range $t := .Tables}}{{if $t.Title}}<h2>{{$t.Title}}</h2>{{end}}
<table class="grid">{{if $t.Head}}<tr>{{range $i, $h := $t.Head}}<th{{if index $t.Right $i}} class="num"{{end}}>{{$h}}</th>{{end}}</tr>{{end}}
{{range $t.Rows}}<tr>{{range $i, $c := .}}<td{{if index $t.Right $i}} class="num"{{end}}>{{$c}}</td>{{end}}</tr>{{end}}</table>
{{range $t.Notes}}<p>{{.}}</p>{{end}}{{end}}
{{if .Timeline}}<h2>{{if .TimelineTitle}}{{.TimelineTitle}}{{else}}Who held the lock, over time{{end}}</h2>
{{.Timeline}}
<p class="key"><span style="background:#3a7bd5"></span>holds the lock
{{if .Key.Stale}}<span style="background:repeating-linear-gradient(45deg,#3a7bd5 0 3px,#cfdcf3 3px 6px)"></span>still at work after its lease ran out{{end}}
{{if .Key.Overlap}}<span style="background:#d33"></span>another holder of the same lock is inside too (a double grant){{end}}<br>
{{if .Key.Expiry}}<span style="border-left:2px dashed #900;height:14px;width:0"></span>its lease runs out in the lock service{{end}}
{{if .Points}}<span style="background:#222;width:8px;height:8px;transform:rotate(45deg)"></span>what it did{{end}}
{{if .Marks}}<span style="background:#e80;width:2px"></span>an event{{end}}
{{if .Gaps}}<span style="background:#eee;border:1px dashed #999"></span>not drawn: the holds between the stretches shown{{end}}</p>
{{range .Zoomed}}<h2>{{.Title}}</h2>
{{.SVG}}{{end}}{{end}}
{{if .Histogram}}<h2>How long each acquisition waited</h2>
{{.Histogram}}{{end}}
{{if .Parts}}<h2>What happened</h2>
<table class="log"><tr><th>ms</th><th>who</th><th>what</th></tr>
{{range .Parts}}{{if .Title}}<tr><th colspan="3">{{.Title}}</th></tr>{{end}}
{{range .Lines}}<tr><td>{{printf "%.1f" .AtMS}}</td><td>{{.Who}}</td><td>{{.What}}</td></tr>{{end}}{{end}}</table>{{end}}
{{range .Notes}}<p>{{.}}</p>{{end}}
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
