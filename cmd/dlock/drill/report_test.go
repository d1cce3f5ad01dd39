package drill_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/drill"
)

// minBarW is the narrowest bar the reports promise to draw.
const minBarW = 4.0

// elem is one element of a parsed svg.
type elem struct {
	name  string
	attrs map[string]string
	text  string
}

func (e elem) num(t *testing.T, attr string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(e.attrs[attr], 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", e.name, attr, e.attrs[attr], err)
	}
	return v
}

// svgs parses every inline <svg> of an HTML page as XML and returns its
// elements, in document order, per svg.
func svgs(t *testing.T, page string) [][]elem {
	t.Helper()
	var out [][]elem
	for rest := page; ; {
		i := strings.Index(rest, "<svg")
		if i < 0 {
			return out
		}
		j := strings.Index(rest[i:], "</svg>")
		if j < 0 {
			t.Fatalf("an <svg> is not closed")
		}
		d := xml.NewDecoder(strings.NewReader(rest[i : i+j+len("</svg>")]))
		var es []elem
		var open []int // indices into es of the open elements
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("svg is not well-formed XML: %v", err)
			}
			switch tok := tok.(type) {
			case xml.StartElement:
				e := elem{name: tok.Name.Local, attrs: map[string]string{}}
				for _, a := range tok.Attr {
					e.attrs[a.Name.Local] = a.Value
				}
				es = append(es, e)
				open = append(open, len(es)-1)
			case xml.EndElement:
				open = open[:len(open)-1]
			case xml.CharData: // an element's text includes its children's (a bar's title)
				for _, k := range open {
					es[k].text += string(tok)
				}
			}
		}
		out = append(out, es)
		rest = rest[i+j:]
	}
}

func class(es []elem, name, class string) []elem {
	var out []elem
	for _, e := range es {
		if e.name == name && slices.Contains(strings.Fields(e.attrs["class"]), class) {
			out = append(out, e)
		}
	}
	return out
}

func texts(es []elem) []string {
	var out []string
	for _, e := range es {
		out = append(out, strings.TrimSpace(e.text))
	}
	return out
}

func render(t *testing.T, r *drill.Summary) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	if os.Getenv("DLOCK_KEEP_REPORTS") != "" { // to look at them in a browser
		name := strings.ReplaceAll(t.Name(), "/", "_") + ".html"
		if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// checkTimeline asserts what every timeline promises: bars at least
// minBarW wide, rows no closer than a bar is tall (bars of different rows
// never overlap), an axis with at least three labelled ticks in
// increasing order and a title, every actor's row labelled with its name,
// and no random key name (drill:...) as a label.
func checkTimeline(t *testing.T, es []elem, actors ...string) {
	t.Helper()
	bars := class(es, "rect", "bar")
	if len(bars) == 0 {
		t.Fatal("no bars")
	}
	for _, cl := range []string{"bar", "overlap"} {
		for _, b := range class(es, "rect", cl) {
			if w := b.num(t, "width"); w < minBarW {
				t.Errorf("%s %q is %.2f px wide, want >= %v", cl, b.text, w, minBarW)
			}
		}
	}
	// Rows: the bars' y per row index, rows in order down the page.
	rowY, barH := map[int]float64{}, 0.0
	for _, b := range bars {
		r, err := strconv.Atoi(b.attrs["data-row"])
		if err != nil {
			t.Fatalf("bar without a row: %v", b.attrs)
		}
		y := b.num(t, "y")
		if prev, ok := rowY[r]; ok && prev != y {
			t.Errorf("row %d has bars at y %.1f and %.1f", r, prev, y)
		}
		rowY[r], barH = y, max(barH, b.num(t, "height"))
	}
	var idx []int
	for r := range rowY {
		idx = append(idx, r)
	}
	sort.Ints(idx)
	for k := 1; k < len(idx); k++ {
		if gap := rowY[idx[k]] - rowY[idx[k-1]]; gap < barH {
			t.Errorf("rows %d and %d are %.1f px apart, bars %.1f px tall: they overlap", idx[k-1], idx[k], gap, barH)
		}
	}
	ticks, labels := class(es, "line", "tick"), class(es, "text", "tick-label")
	if len(ticks) < 3 || len(labels) < 3 {
		t.Errorf("axis: %d ticks, %d tick labels; want >= 3 each", len(ticks), len(labels))
	}
	prev := -1e18
	for _, l := range texts(labels) {
		v, err := strconv.ParseFloat(l, 64)
		if err != nil || v <= prev {
			t.Errorf("tick labels %q are not increasing numbers", texts(labels))
			break
		}
		prev = v
	}
	if titles := texts(class(es, "text", "axis-title")); len(titles) == 0 || !strings.Contains(titles[0], "ms") {
		t.Errorf("axis title %q, want one naming its unit (ms)", titles)
	}
	rowLabels := texts(class(es, "text", "row-label"))
	for _, a := range actors {
		if !slices.Contains(rowLabels, a) {
			t.Errorf("no row labelled %q; rows: %q", a, rowLabels)
		}
	}
	for _, l := range append(rowLabels, texts(class(es, "text", "lane-label"))...) {
		if strings.Contains(l, "drill:") {
			t.Errorf("label %q is a key name, not an actor", l)
		}
	}
}

// rowOf returns the bars of the row labelled who under lane (the first
// such row).
func rowOf(t *testing.T, es []elem, lane, who string) []elem {
	t.Helper()
	inLane := false
	for _, e := range es {
		if slices.Contains(strings.Fields(e.attrs["class"]), "lane-label") {
			inLane = strings.TrimSpace(e.text) == lane
		}
		if inLane && e.name == "text" && e.attrs["class"] == "row-label" && strings.TrimSpace(e.text) == who {
			var bars []elem
			for _, b := range class(es, "rect", "bar") {
				if b.attrs["data-row"] == e.attrs["data-row"] {
					bars = append(bars, b)
				}
			}
			return bars
		}
	}
	t.Fatalf("no row %q in lane %q", who, lane)
	return nil
}

// The misdelete report shows its story: A's lease ends while A's bar runs
// on, B's and C's holds are visible bars, and an enlarged view draws the
// double grant.
func TestReportMisdelete(t *testing.T) {
	res, err := drill.Misdelete(context.Background(), openRedis(t), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	page := render(t, res.Summary())
	all := svgs(t, page)
	if len(all) != 2 {
		t.Fatalf("%d svgs, want the timeline and its enlarged window", len(all))
	}
	tl := all[0]
	checkTimeline(t, tl, "A", "B", "C")
	const naive = "naive: GET then DEL"
	expiries := class(tl, "line", "expiry")
	if len(expiries) < 2 { // A's, in both runs
		t.Fatalf("%d lease-expiry markers, want A's in both runs", len(expiries))
	}
	a, b := rowOf(t, tl, naive, "A")[0], rowOf(t, tl, naive, "B")[0]
	ex := -1.0
	for _, e := range expiries {
		if e.attrs["data-row"] == a.attrs["data-row"] {
			ex = e.num(t, "x1")
		}
	}
	if ex < 0 {
		t.Fatal("no lease-expiry marker on A's row of the GET-then-DEL run")
	}
	if ax, aw := a.num(t, "x"), a.num(t, "width"); !(ax < ex && ex < ax+aw) {
		t.Errorf("A's lease ends at x %.1f, outside A's bar [%.1f, %.1f]: the page does not show A running past its lease", ex, ax, ax+aw)
	}
	if bx := b.num(t, "x"); bx < ex {
		t.Errorf("B's bar starts at x %.1f, before A's lease ends (%.1f)", bx, ex)
	}
	if len(class(tl, "rect", "overlap")) == 0 {
		t.Error("no double grant drawn")
	}
	zoom := all[1]
	checkTimeline(t, zoom, "A", "B", "C")
	if w := rowOf(t, zoom, naive, "B")[0].num(t, "width"); w < 20 {
		t.Errorf("enlarged, B's hold is %.1f px wide; want it plainly visible (>= 20)", w)
	}
	for _, want := range []string{"DEL: deletes B&#39;s key", "What happened"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestReportLease(t *testing.T) {
	// A 500 ms watchdog timeout (renewals every 167 ms): 200 ms lost the
	// lock to a missed renewal ("unreachable") under -race at load 8.
	res, err := drill.Lease(context.Background(), openRedis(t), 500*time.Millisecond, 800*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	tl := svgs(t, render(t, res.Summary()))[0]
	checkTimeline(t, tl, "A", "B")
	if len(class(tl, "line", "expiry")) != 1 {
		t.Errorf("want one lease-expiry marker (the fixed lease's A)")
	}
	if len(class(tl, "text", "lane-label")) != 2 {
		t.Errorf("lanes %q, want fixed lease and watchdog", texts(class(tl, "text", "lane-label")))
	}
}

func TestReportContention(t *testing.T) {
	res, err := drill.Contention(context.Background(), openRedis(t), 3, 20, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	all := svgs(t, render(t, res.Summary()))
	if len(all) != 2 {
		t.Fatalf("%d svgs, want the timeline and the histogram", len(all))
	}
	checkTimeline(t, all[0], "worker-0", "worker-1", "worker-2")
	if got := texts(class(all[0], "text", "row-label")); !slices.Equal(got, []string{"worker-0", "worker-1", "worker-2"}) {
		t.Errorf("rows %q, want the workers in order", got)
	}
	h := all[1]
	if n := len(class(h, "text", "tick-label")); n < 3 {
		t.Errorf("histogram: %d tick labels", n)
	}
	if titles := texts(class(h, "text", "axis-title")); len(titles) != 2 {
		t.Errorf("histogram axis titles %q, want x and y", titles)
	}
	n := 0
	for _, b := range class(h, "rect", "bar") {
		var c int
		fmt.Sscanf(b.text, "%d waits", &c)
		n += c
	}
	if n != 60 {
		t.Errorf("histogram bars hold %d waits, want 60", n)
	}
}

func TestReportRedLock(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatal("redis-server is not on PATH")
	}
	// B waits half the lease for its quorum: 100 ms (a 200 ms lease) was
	// not enough for 3 fresh connections under -race at load 8.
	res, err := drill.RedLock(context.Background(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkClaims(t, res.Summary())
	if !res.DoubleGrant {
		t.Error("B got in while A held a quorum, and the spans do not show it")
	}
	all := svgs(t, render(t, res.Summary()))
	if len(all) != 2 {
		t.Fatalf("%d svgs, want the timeline and its enlarged window", len(all))
	}
	for _, es := range all {
		checkTimeline(t, es, "A", "B")
		if len(class(es, "line", "mark")) != 1 {
			t.Error("no mark for the clock jump")
		}
	}
}

func TestReportPause(t *testing.T) {
	res, err := drill.Pause(context.Background(), openRedis(t), drill.PauseOptions{
		Lease: 200 * time.Millisecond,
		Spawn: func(ctx context.Context, args []string) *exec.Cmd {
			cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^TestPauseHolderProcess$", "--"}, args...)...)
			cmd.Env = append(os.Environ(), "DRILL_PAUSE_HOLDER=1")
			cmd.Stderr = os.Stderr
			return cmd
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	checkClaims(t, res.Summary())
	tl := svgs(t, render(t, res.Summary()))[0]
	checkTimeline(t, tl, "A", "B")
	if len(class(tl, "line", "expiry")) != 1 {
		t.Error("no lease-expiry marker for the frozen holder")
	}
	if !regexp.MustCompile(`SIGSTOP: frozen`).MatchString(texts(class(tl, "text", "note"))[0]) {
		t.Errorf("notes %q: the freeze is not shown", texts(class(tl, "text", "note")))
	}
}

// TestPauseHolderProcess is the child process of TestReportPause (run with
// DRILL_PAUSE_HOLDER=1); by itself it does nothing.
func TestPauseHolderProcess(t *testing.T) {
	if os.Getenv("DRILL_PAUSE_HOLDER") != "1" {
		return
	}
	i := slices.Index(os.Args, "--")
	a, err := drill.ParsePauseHolderArgs(os.Args[i+1:])
	if err == nil {
		err = drill.PauseHolder(context.Background(), a, os.Stdin, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "pause holder:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// Short holds, many holders and names that need escaping, without Redis.
func TestReportLayout(t *testing.T) {
	r := &drill.Summary{
		Title: "layout <&>",
		Spans: []drill.Span{
			{Lane: "lock <1>", Who: "A", StartMS: 0, EndMS: 1000, LeaseEndMS: 400},
			{Lane: "lock <1>", Who: "B", StartMS: 500, EndMS: 500.01},
			{Lane: "lock <1>", Who: "C", StartMS: 500.005, EndMS: 500.02},
			{Lane: "other", Who: "w10", StartMS: 10, EndMS: 20},
			{Lane: "other", Who: "w2", StartMS: 30, EndMS: 40},
		},
		Points: []drill.Point{{Lane: "lock <1>", Who: "A", AtMS: 999, Label: "DEL \"x\""}},
		Marks:  []drill.Mark{{AtMS: 500, Label: "fault"}},
		Zooms:  []drill.Window{{Title: "zoom", FromMS: 499, ToMS: 501}},
	}
	page := render(t, r)
	all := svgs(t, page)
	if len(all) != 2 {
		t.Fatalf("%d svgs", len(all))
	}
	checkTimeline(t, all[0], "A", "B", "C", "w2", "w10")
	if got := texts(class(all[0], "text", "row-label")); !slices.Equal(got, []string{"A", "B", "C", "w2", "w10"}) {
		t.Errorf("rows %q, want lanes in order, holders in natural order", got)
	}
	if len(class(all[0], "rect", "stale")) != 1 {
		t.Error("A's time past its lease is not drawn")
	}
	if n := len(class(all[0], "rect", "overlap")); n < 3 {
		t.Errorf("%d overlap marks, want A's, B's and C's", n)
	}
	checkTimeline(t, all[1], "A", "B", "C")
	if got := texts(class(all[1], "text", "row-label")); slices.Contains(got, "w2") {
		t.Errorf("the window draws rows with nothing in it: %q", got)
	}
	if strings.Contains(page, "<1>") || !strings.Contains(page, "lock &lt;1&gt;") {
		t.Error("names are not escaped")
	}
}
