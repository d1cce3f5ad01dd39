package drill

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

// histogramSVG draws the wait-time buckets as bars over labelled axes:
// bucket upper bounds along x, acquisitions up y.
func histogramSVG(bs []Bucket) template.HTML {
	const (
		x0, top, plotH = 70.0, 14.0, 200.0
		gap            = 10.0
	)
	barW := min(max(44, 480/float64(len(bs))-gap), 90)
	most := 1
	for _, b := range bs {
		most = max(most, b.Count)
	}
	step := max(1, tickStep(float64(most)))
	yMax := math.Ceil(float64(most)/step) * step
	y := func(n float64) float64 { return top + plotH - n/yMax*plotH }
	x1 := max(x0+gap+float64(len(bs))*(barW+gap), x0+420) // room for the axis title
	var s strings.Builder
	for n := 0.0; n <= yMax+1e-9; n += step {
		fmt.Fprintf(&s, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e3e3e3"/>`, x0, x1, y(n), y(n))
		fmt.Fprintf(&s, `<line class="tick" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#444"/>`, x0-5, x0, y(n), y(n))
		fmt.Fprintf(&s, `<text class="tick-label" x="%.1f" y="%.1f" font-size="11" text-anchor="end" fill="#333">%.0f</text>`, x0-8, y(n)+4, n)
	}
	for i, b := range bs {
		bx := x0 + gap + float64(i)*(barW+gap)
		h := float64(b.Count) / yMax * plotH
		fmt.Fprintf(&s, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#3a7bd5"><title>%d waits in (%g, %g] ms</title></rect>`,
			bx, y(float64(b.Count)), barW, h, b.Count, b.LoMS, b.HiMS)
		fmt.Fprintf(&s, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle" fill="#222">%d</text>`, bx+barW/2, y(float64(b.Count))-3, b.Count)
		fmt.Fprintf(&s, `<line class="tick" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#444"/>`, bx+barW/2, bx+barW/2, top+plotH, top+plotH+5)
		fmt.Fprintf(&s, `<text class="tick-label" x="%.1f" y="%.1f" font-size="11" text-anchor="middle" fill="#333">%g–%g</text>`, bx+barW/2, top+plotH+18, b.LoMS, b.HiMS)
	}
	fmt.Fprintf(&s, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#444"/>`, x0, x1, top+plotH, top+plotH)
	fmt.Fprintf(&s, `<line class="axis" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#444"/>`, x0, x0, top, top+plotH)
	fmt.Fprintf(&s, `<text class="axis-title" x="%.1f" y="%.1f" font-size="12" text-anchor="middle" fill="#222">wait before the lock was granted (ms)</text>`,
		(x0+x1)/2, top+plotH+38)
	fmt.Fprintf(&s, `<text class="axis-title" transform="rotate(-90)" x="%.1f" y="16" font-size="12" text-anchor="middle" fill="#222">acquisitions</text>`,
		-(top + plotH/2))
	w, h := max(x1+20, 520), top+plotH+48
	return template.HTML(fmt.Sprintf(`<svg class="histogram" xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f">%s</svg>`,
		w, h, w, h, s.String()))
}
