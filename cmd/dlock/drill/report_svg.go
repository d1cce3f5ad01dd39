package drill

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The timeline's geometry, in pixels. Every holder has a row of its own
// (rowH tall, its bar barH tall at barY inside it, so bars of neighbouring
// rows never touch), grouped under its lane's name; the band above a bar
// carries the row's notes (lease end, points), one more noteH line for
// each note that would run into another.
const (
	svgW      = 1000.0
	plotX0    = 170.0 // left edge of the time axis
	plotX1    = svgW - 40
	laneHeadH = 22.0
	rowH      = 28.0
	barY      = 12.0 // bar top inside its row
	barH      = 14.0
	noteH     = 11.0
	minBarW   = 4.0 // the narrowest bar drawn, whatever its duration
	axisH     = 44.0
	markLineH = 13.0 // height of one line of mark labels
	maxRows   = 80
	charW     = 6.2 // estimated width of one character of 11px text
)

// row is one holder of one lane.
type row struct {
	lane, who string
	spans     []Span
	points    []Point
}

// rows groups spans by lane — in the order of lanes, then the others in
// order of appearance — then holder, and gives each row its points (points
// of no row are dropped).
func rows(spans []Span, points []Point, lanes []string) (out []row) {
	at := map[[2]string]int{}
	for _, s := range spans {
		k := [2]string{s.Lane, s.Who}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, row{lane: s.Lane, who: s.Who})
		}
		out[i].spans = append(out[i].spans, s)
	}
	for _, p := range points {
		if i, ok := at[[2]string{p.Lane, p.Who}]; ok {
			out[i].points = append(out[i].points, p)
		}
	}
	first := map[string]int{} // lanes in order, their rows together
	for i, l := range lanes {
		if _, ok := first[l]; !ok {
			first[l] = i - len(lanes) // before any lane not named
		}
	}
	for i, r := range out {
		if _, ok := first[r.lane]; !ok {
			first[r.lane] = i
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if a, b := first[out[i].lane], first[out[j].lane]; a != b {
			return a < b
		}
		return naturalLess(out[i].who, out[j].who)
	})
	return out
}

// naturalLess orders names with their numbers by value: w2 before w10.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		na, ra := leadingNumber(a)
		nb, rb := leadingNumber(b)
		switch {
		case na >= 0 && nb >= 0:
			if na != nb {
				return na < nb
			}
			a, b = ra, rb
		case a[0] != b[0]:
			return a[0] < b[0]
		default:
			a, b = a[1:], b[1:]
		}
	}
	return len(a) < len(b)
}

// leadingNumber returns the number s starts with (-1: none) and the rest.
func leadingNumber(s string) (int, string) {
	i := 0
	for i < len(s) && i < 9 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return -1, s
	}
	n, _ := strconv.Atoi(s[:i])
	return n, s[i:]
}

// Timeline draws s's timeline from fromMS to toMS (both 0: all of it) as
// an svg element; id prefixes the ids inside it (one per page).
func (s *Summary) Timeline(id string, fromMS, toMS float64) template.HTML {
	return timelineSVG(s, id, fromMS, toMS)
}

// timelineSVG draws the report's spans from fromMS to toMS (both 0: all of
// them, with room on the right for the last notes); id prefixes the ids
// inside the svg.
func timelineSVG(r *Summary, id string, fromMS, toMS float64) template.HTML {
	if fromMS == 0 && toMS == 0 {
		lo, hi := math.Inf(1), 0.0
		for _, s := range r.Spans {
			lo, hi = min(lo, s.StartMS), max(hi, s.EndMS, s.LeaseEndMS)
		}
		for _, m := range r.Marks {
			lo, hi = min(lo, m.AtMS), max(hi, m.AtMS)
		}
		for _, p := range r.Points {
			hi = max(hi, p.AtMS)
		}
		// Start at 0 unless the spans begin late (a window of a long run).
		if lo > 0.2*hi {
			fromMS = math.Floor(lo/tickStep(hi-lo)) * tickStep(hi-lo)
		}
		room := 0.02 // on the right, for the notes of the last moments
		if len(r.Points) > 0 || len(r.Spans) < 20 {
			room = 0.25
		}
		toMS = max(hi+(hi-fromMS)*room, fromMS+1)
	}
	v := view{id: id, from: fromMS, to: toMS}
	if !r.Outside {
		v.overlaps = overlaps(r.Spans)
	}
	in := func(ms float64) bool { return ms >= fromMS && ms <= toMS }

	// The rows with something to show in this stretch.
	var shown []row
	for _, rw := range rows(r.Spans, r.Points, r.Lanes) {
		for _, s := range rw.spans {
			if s.EndMS >= fromMS && s.StartMS <= toMS {
				shown = append(shown, rw)
				break
			}
		}
	}
	hidden := 0
	if len(shown) > maxRows {
		hidden = len(shown) - maxRows
		shown = shown[:maxRows]
	}
	var marks []Mark
	for _, m := range r.Marks {
		if in(m.AtMS) {
			marks = append(marks, m)
		}
	}
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].AtMS < marks[j].AtMS })
	// Mark labels: each on the first line where it does not run into the
	// label before it; at the right edge, left of its line.
	var lineEnd []float64
	markLine := make([]int, len(marks))
	for i, m := range marks {
		lx, w := v.x(m.AtMS)+3, textW(m.Label)
		if lx+w > svgW {
			lx = v.x(m.AtMS) - 3 - w
		}
		l := 0
		for l < len(lineEnd) && lineEnd[l] > lx-4 {
			l++
		}
		if l == len(lineEnd) {
			lineEnd = append(lineEnd, 0)
		}
		lineEnd[l], markLine[i] = lx+w, l
	}
	top := 8 + float64(len(lineEnd))*markLineH
	if len(shown) > 10 {
		top += 12 // the time labels on top
	}

	var body strings.Builder
	y := top
	lane := "\x00"
	for i, rw := range shown {
		if rw.lane != lane {
			lane = rw.lane
			fmt.Fprintf(&body, `<text class="lane-label" x="4" y="%.1f" font-size="12" font-weight="bold" fill="#222">%s</text>`,
				y+15, esc(lane))
			fmt.Fprintf(&body, `<line x1="4" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#bbb"/>`, plotX1, y+laneHeadH-2, y+laneHeadH-2)
			y += laneHeadH
		}
		var rb strings.Builder
		extra := drawRow(&rb, rw, i, y, v)
		if i%2 == 1 {
			fmt.Fprintf(&body, `<rect x="4" y="%.1f" width="%.1f" height="%.1f" fill="#f4f5f7"/>`, y, plotX1-4, rowH+extra)
		}
		fmt.Fprintf(&body, `<text class="row-label" data-row="%d" x="%.1f" y="%.1f" font-size="12" text-anchor="end" fill="#222">%s</text>`,
			i, plotX0-10, y+extra+barY+barH-3, esc(rw.who))
		body.WriteString(rb.String())
		y += rowH + extra
	}
	rowsEnd := y

	var b strings.Builder
	fmt.Fprintf(&b, `<defs><pattern id="%s-stale" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">`+
		`<rect width="6" height="6" fill="#cfdcf3"/><line x1="0" y1="0" x2="0" y2="6" stroke="%s" stroke-width="3"/></pattern>`+
		`<pattern id="%s-gap" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">`+
		`<rect width="8" height="8" fill="#f2f2f2"/><line x1="0" y1="0" x2="0" y2="8" stroke="#ddd" stroke-width="2"/></pattern></defs>`, id, colorOK, id)
	// Time axis: grid lines and ticks at round values, labels, a title.
	step := tickStep(toMS - fromMS)
	for t := math.Ceil(fromMS/step) * step; t <= toMS+step*1e-9; t += step {
		tx := v.x(t)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e3e3e3"/>`, tx, tx, top, rowsEnd)
		fmt.Fprintf(&b, `<line class="tick" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#444"/>`, tx, tx, rowsEnd, rowsEnd+5)
		fmt.Fprintf(&b, `<text class="tick-label" x="%.1f" y="%.1f" font-size="11" text-anchor="middle" fill="#333">%s</text>`,
			tx, rowsEnd+17, fmtMS(t, step))
	}
	if len(shown) > 10 { // a tall timeline: its time labels on top too
		for t := math.Ceil(fromMS/step) * step; t <= toMS+step*1e-9; t += step {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle" fill="#777">%s</text>`, v.x(t), top-1, fmtMS(t, step))
		}
	}
	b.WriteString(body.String())
	// The stretches whose holds were left out: shaded and labelled, so
	// that they do not read as time when nobody held a lock.
	for _, g := range r.Gaps {
		if g.ToMS <= fromMS || g.FromMS >= toMS {
			continue
		}
		gx0, gx1 := v.x(max(g.FromMS, fromMS)), v.x(min(g.ToMS, toMS))
		if gx1-gx0 < 2 {
			continue
		}
		fmt.Fprintf(&b, `<rect class="gap" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#%s-gap)" fill-opacity="0.85" stroke="#999" stroke-dasharray="4,3">`+
			`<title>%s: %.0f – %.0f ms</title></rect>`, gx0, top, gx1-gx0, rowsEnd-top, id, esc(g.Title), g.FromMS, g.ToMS)
		if gx1-gx0 > textW("not drawn")+6 {
			fmt.Fprintf(&b, `<text class="gap-label" x="%.1f" y="%.1f" font-size="10" text-anchor="middle" fill="#666">not drawn</text>`,
				(gx0+gx1)/2, top+11)
		}
	}
	fmt.Fprintf(&b, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#444"/>`, plotX0, plotX1, rowsEnd, rowsEnd)
	axis := r.Axis
	if axis == "" {
		axis = "time since the drill started (ms)"
	}
	fmt.Fprintf(&b, `<text class="axis-title" x="%.1f" y="%.1f" font-size="12" text-anchor="middle" fill="#222">%s</text>`,
		(plotX0+plotX1)/2, rowsEnd+35, esc(axis))
	for i, m := range marks {
		mx := v.x(m.AtMS)
		ly := 8 + float64(markLine[i]+1)*markLineH - 3
		lx, anchor := mx+3, "start"
		if lx+textW(m.Label) > svgW {
			lx, anchor = mx-3, "end"
		}
		fmt.Fprintf(&b, `<line class="mark" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e80" stroke-width="2"><title>%s at %.1f ms</title></line>`,
			mx, mx, ly+2, rowsEnd, esc(m.Label), m.AtMS)
		fmt.Fprintf(&b, `<text class="mark-label" x="%.1f" y="%.1f" font-size="11" fill="#b45f00" text-anchor="%s">%s</text>`, lx, ly, anchor, esc(m.Label))
	}
	if hidden > 0 {
		fmt.Fprintf(&b, `<text x="4" y="%.1f" font-size="11" fill="#555">(%d more holders not drawn)</text>`, rowsEnd+35, hidden)
	}
	h := rowsEnd + axisH
	return template.HTML(fmt.Sprintf(`<svg class="timeline" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">%s</svg>`,
		svgW, h, svgW, h, b.String()))
}

// drawRow draws one holder's bars, lease ends and points in the row at y
// and returns how much taller than rowH the row is (for its notes). A bar
// is solid while its lease ran in Redis, hatched where the holder ran on
// after its lease ran out, and red where another holder of its lane was
// inside too.
func drawRow(b *strings.Builder, rw row, i int, top float64, v view) float64 {
	notes := rowNotes(rw, v)
	lines := 1
	for _, n := range notes {
		lines = max(lines, n.line+1)
	}
	extra := float64(lines-1) * noteH
	y := top + extra // the row below its extra note lines
	labelled := len(rw.spans) <= 4
	// What a label outside a bar must not cover: the row's bars and points,
	// and the labels already placed.
	var taken [][2]float64
	for _, s := range rw.spans {
		if s.EndMS >= v.from && s.StartMS <= v.to {
			x0 := v.x(max(s.StartMS, v.from))
			taken = append(taken, [2]float64{x0, max(v.x(min(s.EndMS, v.to)), x0+minBarW)})
		}
	}
	for _, n := range notes { // diamonds and lease-end lines
		taken = append(taken, [2]float64{v.x(n.at) - 4, v.x(n.at) + 4})
	}
	free := func(lo, hi float64) bool {
		if lo < plotX0 || hi > svgW-2 {
			return false
		}
		for _, t := range taken {
			if lo < t[1]+2 && t[0] < hi+2 {
				return false
			}
		}
		return true
	}
	for _, s := range rw.spans {
		if s.EndMS < v.from || s.StartMS > v.to {
			continue
		}
		x0, x1 := v.x(max(s.StartMS, v.from)), v.x(min(s.EndMS, v.to))
		w := max(x1-x0, minBarW)
		tip := fmt.Sprintf("%s on %s: %.1f – %.1f ms (%s)", s.Who, s.Lane, s.StartMS, s.EndMS, fmtDur(s.EndMS-s.StartMS))
		fmt.Fprintf(b, `<rect class="bar" data-row="%d" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`,
			i, x0, y+barY, w, barH, colorOK, esc(tip))
		if s.LeaseEndMS > s.StartMS && s.LeaseEndMS < s.EndMS && s.LeaseEndMS < v.to {
			sx := v.x(max(s.LeaseEndMS, v.from))
			fmt.Fprintf(b, `<rect class="stale" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="url(#%s)"><title>%s: its lease ran out at %.1f ms; it runs on believing it holds the lock</title></rect>`,
				sx, y+barY, max(x0+w-sx, 0), barH, v.id+"-stale", esc(s.Who), s.LeaseEndMS)
		}
		overlaps := v.overlaps[spanKey(s)]
		for _, o := range overlaps {
			if o[1] < v.from || o[0] > v.to {
				continue
			}
			ox0, ox1 := v.x(max(o[0], v.from)), v.x(min(o[1], v.to))
			fmt.Fprintf(b, `<rect class="overlap" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s and another holder both inside, %.2f – %.2f ms</title></rect>`,
				ox0, y+barY, max(ox1-ox0, minBarW), barH, colorBad, esc(s.Who), o[0], o[1])
		}
		if s.Bad && len(overlaps) == 0 { // the drill's own witness saw a double grant
			fmt.Fprintf(b, `<rect class="overlap" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`,
				x0, y+barY, w, barH, colorBad, esc(tip))
		}
		if !labelled || s.StartMS < v.from { // a span cut by a window is labelled in the full view
			continue
		}
		text := rw.who + " holds, " + fmtDur(s.EndMS-s.StartMS)
		tw := textW(text) * 10 / 11
		solid := w // inside the bar only on its solid part
		if s.LeaseEndMS > s.StartMS && s.LeaseEndMS < s.EndMS {
			solid = v.x(min(s.LeaseEndMS, v.to)) - x0
		}
		lx := x0 + 4 // inside the bar: after a diamond at its start, clear of any other
		for _, p := range rw.points {
			if px := v.x(p.AtMS); p.AtMS >= v.from && px > x0-4 && px < x0+8 {
				lx = px + 7
			}
		}
		hitsPoint := false
		for _, p := range rw.points {
			if px := v.x(p.AtMS); p.AtMS >= v.from && px > lx-4 && px < lx+tw+4 {
				hitsPoint = true
			}
		}
		switch {
		case lx+tw+4 < x0+solid && !hitsPoint:
			fmt.Fprintf(b, `<text class="bar-label" x="%.1f" y="%.1f" font-size="10" fill="#fff">%s</text>`, lx, y+barY+barH-4, esc(text))
		case free(x0+w+3, x0+w+4+tw):
			fmt.Fprintf(b, `<text class="bar-label" x="%.1f" y="%.1f" font-size="10" fill="#222">%s</text>`, x0+w+4, y+barY+barH-4, esc(text))
			taken = append(taken, [2]float64{x0 + w + 4, x0 + w + 4 + tw})
		case free(x0-4-tw, x0-3):
			fmt.Fprintf(b, `<text class="bar-label" x="%.1f" y="%.1f" font-size="10" fill="#222" text-anchor="end">%s</text>`, x0-4, y+barY+barH-4, esc(text))
			taken = append(taken, [2]float64{x0 - 4 - tw, x0 - 4})
		}
	}
	for _, n := range notes {
		nx := v.x(n.at)
		if n.expiry {
			fmt.Fprintf(b, `<line class="expiry" data-row="%d" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#900" stroke-width="2" stroke-dasharray="3,2"><title>%s's lease ran out at %.1f ms</title></line>`,
				i, nx, nx, top+float64(n.line)*noteH+3, y+rowH-1, esc(rw.who), n.at)
		} else {
			fmt.Fprintf(b, `<path class="point" d="M%.1f %.1fl4 4l-4 4l-4-4z" fill="#222" stroke="#fff"><title>%s at %.2f ms</title></path>`,
				nx, y+barY+barH/2-4, esc(n.text), n.at)
		}
		anchor := "start"
		if n.tx == nx-3 {
			anchor = "end"
		}
		fmt.Fprintf(b, `<text class="note" x="%.1f" y="%.1f" font-size="10" fill="%s" text-anchor="%s">%s</text>`,
			n.tx, top+float64(n.line)*noteH+9, n.color, anchor, esc(n.text))
	}
	return extra
}

// note is a lease end or a point, laid out in a row's note band: on line
// (0: the top one), its text at tx (anchored at its start, or at its end
// when tx is left of the moment).
type note struct {
	at          float64
	text, color string
	expiry      bool
	line        int
	tx          float64
}

// rowNotes lays out a row's notes in time order, each on the first line
// where it does not run into a note before it.
func rowNotes(rw row, v view) []note {
	var notes []note
	for _, s := range rw.spans {
		if s.LeaseEndMS > 0 && s.LeaseEndMS >= v.from && s.LeaseEndMS <= v.to {
			notes = append(notes, note{at: s.LeaseEndMS, text: "lease ends", color: "#900", expiry: true})
		}
	}
	for _, p := range rw.points {
		if p.AtMS >= v.from && p.AtMS <= v.to {
			notes = append(notes, note{at: p.AtMS, text: p.Label, color: "#222"})
		}
	}
	sort.SliceStable(notes, func(i, j int) bool { return notes[i].at < notes[j].at })
	var used [][][2]float64 // per line, the x ranges taken
	for k := range notes {
		n := &notes[k]
		nx, tw := v.x(n.at), textW(n.text)*10/11
		n.tx = nx + 3
		lo, hi := n.tx, n.tx+tw
		if hi > svgW-2 {
			n.tx = nx - 3
			lo, hi = n.tx-tw, n.tx
			if lo < 4 { // too long for either side: from the left edge
				n.tx = max(4, svgW-2-tw)
				lo, hi = n.tx, n.tx+tw
			}
		}
		n.line = -1
		for l, taken := range used {
			free := true
			for _, r := range taken {
				if lo < r[1]+8 && r[0] < hi+8 {
					free = false
					break
				}
			}
			if free {
				n.line = l
				break
			}
		}
		if n.line < 0 {
			n.line = len(used)
			used = append(used, nil)
		}
		used[n.line] = append(used[n.line], [2]float64{lo, hi})
	}
	return notes
}

const (
	colorOK  = "#3a7bd5"
	colorBad = "#d33"
)

// view maps one stretch of the timeline onto the plot.
type view struct {
	id       string // prefix of the ids in this svg
	from, to float64
	overlaps map[[4]string][][2]float64
}

func (v view) x(ms float64) float64 { return plotX0 + (ms-v.from)/(v.to-v.from)*(plotX1-plotX0) }

func spanKey(s Span) [4]string {
	return [4]string{s.Lane, s.Who, strconv.FormatFloat(s.StartMS, 'g', -1, 64), strconv.FormatFloat(s.EndMS, 'g', -1, 64)}
}

// overlaps returns, for each span, the stretches during which another
// holder of its lane was inside too (see eachOverlap).
func overlaps(spans []Span) map[[4]string][][2]float64 {
	out := map[[4]string][][2]float64{}
	eachOverlap(spans, func(i, j int, from, to float64) {
		if to > from {
			iv := [2]float64{from, to}
			out[spanKey(spans[i])] = append(out[spanKey(spans[i])], iv)
			out[spanKey(spans[j])] = append(out[spanKey(spans[j])], iv)
		}
	})
	return out
}

// tickStep is a round step (1, 2 or 5 × 10^k) giving 5 to 10 ticks over span.
func tickStep(span float64) float64 {
	if span <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(span/10)))
	for _, m := range []float64{1, 2, 5, 10} {
		if span/(m*p) <= 10 {
			return m * p
		}
	}
	return 10 * p
}

// fmtMS prints a tick value with as many decimals as the step needs.
func fmtMS(t, step float64) string {
	d := 0
	if step < 1 {
		d = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	return strconv.FormatFloat(t, 'f', d, 64)
}

// fmtDur prints a duration in ms for a label.
func fmtDur(ms float64) string {
	switch {
	case ms < 1:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

func textW(s string) float64 { return float64(len([]rune(s))) * charW }

func esc(s string) string { return html.EscapeString(s) }
