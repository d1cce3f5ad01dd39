package drill

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Span is one holder inside one lane (a lock or sku) from StartMS to EndMS,
// as the drill's Timeline recorded it.
type Span struct {
	Lane    string  `json:"lane"`
	Who     string  `json:"who"`
	StartMS float64 `json:"start_ms"`
	EndMS   float64 `json:"end_ms"`
	Bad     bool    `json:"bad,omitempty"` // another holder of its lane was inside at the same time
	// Token is the fencing token of the hold (0: not recorded).
	Token int64 `json:"token,omitempty"`
	// LeaseEndMS is when the holder's lease ran out in the lock service (0:
	// it did not run out while the drill watched, or the drill does not
	// know).
	LeaseEndMS float64 `json:"lease_end_ms,omitempty"`
}

// What the spans say: every statement a drill makes about who was inside
// when — a double grant, an overlap, "two holders at once" — is computed
// here from the recorded spans.

// eachOverlap calls f for every pair of spans of one lane in which the
// holder of span j entered while another holder, of span i, was inside (i
// entered first, or at the same moment and was recorded first), with the
// stretch [from, to] in which both were inside.
func eachOverlap(spans []Span, f func(i, j int, from, to float64)) {
	byLane := map[string][]int{}
	var lanes []string
	for i, s := range spans {
		if _, ok := byLane[s.Lane]; !ok {
			lanes = append(lanes, s.Lane)
		}
		byLane[s.Lane] = append(byLane[s.Lane], i)
	}
	for _, lane := range lanes {
		idx := byLane[lane]
		sort.SliceStable(idx, func(a, b int) bool { return spans[idx[a]].StartMS < spans[idx[b]].StartMS })
		for a, i := range idx {
			for _, j := range idx[a+1:] {
				if spans[j].StartMS >= spans[i].EndMS {
					break
				}
				if spans[j].Who != spans[i].Who {
					f(i, j, spans[j].StartMS, min(spans[i].EndMS, spans[j].EndMS))
				}
			}
		}
	}
}

// markOverlaps sets Bad on every span another holder of its lane was
// inside with.
func markOverlaps(spans []Span) {
	eachOverlap(spans, func(i, j int, _, _ float64) { spans[i].Bad, spans[j].Bad = true, true })
}

// DoubleGrants counts the spans that began while another holder of the
// same lane was inside: the double grants an independent witness saw.
func DoubleGrants(spans []Span) int {
	seen := map[int]bool{}
	eachOverlap(spans, func(_, j int, _, _ float64) { seen[j] = true })
	return len(seen)
}

// overlapMS is how long holders a and b were both inside lane.
func overlapMS(spans []Span, lane, a, b string) float64 {
	total := 0.0
	eachOverlap(spans, func(i, j int, from, to float64) {
		x, y := spans[i].Who, spans[j].Who
		if spans[i].Lane == lane && (x == a && y == b || x == b && y == a) {
			total += max(to-from, 0)
		}
	})
	return total
}

// insideAt returns the holders inside spans[j]'s lane when its holder
// entered (in the order they entered), and, when there were none, the span
// of the holder who left last before (-1: no one had held the lane).
func insideAt(spans []Span, j int) (others []string, lastLeft int) {
	s, lastLeft := spans[j], -1
	for i, o := range spans {
		if i == j || o.Lane != s.Lane || o.Who == s.Who || o.StartMS > s.StartMS || (o.StartMS == s.StartMS && i > j) {
			continue
		}
		if o.EndMS > s.StartMS {
			others = append(others, o.Who)
		} else if lastLeft < 0 || o.EndMS > spans[lastLeft].EndMS {
			lastLeft = i
		}
	}
	if len(others) > 0 {
		lastLeft = -1
	}
	return others, lastLeft
}

// entryNote says who else was inside when the holder of spans[j] entered:
// "A is inside too: two holders at once", "alone inside: A's hold ended
// 0.8 ms before", or "" when no one had held the lane before.
func entryNote(spans []Span, j int) string {
	others, last := insideAt(spans, j)
	switch {
	case len(others) > 0:
		verb := "is"
		if len(others) > 1 {
			verb = "are"
		}
		return fmt.Sprintf("%s %s inside too: %s holders at once", joinAnd(others), verb, count(len(others)+1))
	case last >= 0:
		return fmt.Sprintf("alone inside: %s's hold ended %.1f ms before", spans[last].Who, spans[j].StartMS-spans[last].EndMS)
	}
	return ""
}

// eventText is an event's line: what it says, and for an event that
// opened a span, who else was inside then (entryNote).
func eventText(e Event, spans []Span) string {
	if e.Span < 1 || e.Span > len(spans) {
		return e.What
	}
	if note := entryNote(spans, e.Span-1); note != "" {
		return e.What + "; " + note
	}
	return e.What
}

// bothInside says how long holders a and b were both inside lane, from
// the spans: "296.4 ms" or "never: B entered 0.8 ms after A's hold ended".
func bothInside(spans []Span, lane, a, b string) string {
	if ms := overlapMS(spans, lane, a, b); ms > 0 {
		return fmt.Sprintf("%.1f ms", ms)
	}
	ia, ib := firstSpan(spans, lane, a), firstSpan(spans, lane, b)
	switch {
	case ia < 0 || ib < 0:
		return "never (one of them never entered)"
	case spans[ib].StartMS >= spans[ia].EndMS:
		return fmt.Sprintf("never: %s entered %.1f ms after %s's hold ended", b, spans[ib].StartMS-spans[ia].EndMS, a)
	}
	return "never"
}

// lane returns the spans of one lane, in order.
func lane(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Lane == name {
			out = append(out, s)
		}
	}
	return out
}

// firstSpan returns the index of who's first span in lane (-1: none).
func firstSpan(spans []Span, lane, who string) int {
	for i, s := range spans {
		if s.Lane == lane && s.Who == who {
			return i
		}
	}
	return -1
}

func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// count writes small numbers as words.
func count(n int) string {
	if n >= 0 && n < 10 {
		return []string{"no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}[n]
	}
	return strconv.Itoa(n)
}
