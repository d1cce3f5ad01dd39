package drill

import (
	"bytes"
	"html"
	"strings"
	"testing"
)

// Histories are written here by hand: the lines a drill prints about who
// was inside must follow from the spans, whatever the drill's script
// expected (issue 20: the etcd lease drill said "now two workers are
// inside" when B entered 0.5 ms after A left).

// rendered returns s as text and as the HTML page's text (unescaped).
func rendered(t *testing.T, s *Summary) (text, page string) {
	t.Helper()
	var tb, hb bytes.Buffer
	if err := s.WriteText(&tb); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteHTML(&hb); err != nil {
		t.Fatal(err)
	}
	return tb.String(), html.UnescapeString(hb.String())
}

// both asserts that the text and the HTML report both say want (or, with
// not, that neither does): one summary, two renderings.
func both(t *testing.T, s *Summary, want string, not bool) {
	t.Helper()
	text, page := rendered(t, s)
	for name, out := range map[string]string{"text": text, "html": page} {
		if has := strings.Contains(out, want); has == not {
			t.Errorf("%s: contains %q = %v, want %v:\n%s", name, want, has, !not, text)
		}
	}
}

// sameFigures asserts that every figure and table cell of s reads the same
// in the text and in the HTML report.
func sameFigures(t *testing.T, s *Summary) {
	t.Helper()
	text, page := rendered(t, s)
	var cells []string
	for _, f := range s.Figures {
		cells = append(cells, f.Name, f.Value)
	}
	for _, tb := range s.Tables {
		cells = append(cells, tb.Head...)
		for _, r := range tb.Rows {
			cells = append(cells, r...)
		}
	}
	for _, c := range cells {
		if !strings.Contains(text, c) || !strings.Contains(page, c) {
			t.Errorf("%q is not in both renderings (text %v, html %v)", c, strings.Contains(text, c), strings.Contains(page, c))
		}
	}
}

func TestEntryNote(t *testing.T) {
	for _, c := range []struct {
		why   string
		spans []Span
		want  string
	}{
		{"first in its lane", []Span{{Lane: "l", Who: "A", StartMS: 0, EndMS: 10}}, ""},
		{"after the other left", []Span{{Lane: "l", Who: "A", StartMS: 0, EndMS: 802.8}, {Lane: "l", Who: "B", StartMS: 803.3, EndMS: 900}},
			"alone inside: A's hold ended 0.5 ms before"},
		{"at the moment the other left", []Span{{Lane: "l", Who: "A", StartMS: 0, EndMS: 100}, {Lane: "l", Who: "B", StartMS: 100, EndMS: 200}},
			"alone inside: A's hold ended 0.0 ms before"},
		{"while the other is inside", []Span{{Lane: "l", Who: "A", StartMS: 0, EndMS: 800}, {Lane: "l", Who: "B", StartMS: 505, EndMS: 600}},
			"A is inside too: two holders at once"},
		{"two others inside", []Span{{Lane: "l", Who: "A", StartMS: 0, EndMS: 800}, {Lane: "l", Who: "C", StartMS: 1, EndMS: 800},
			{Lane: "l", Who: "B", StartMS: 505, EndMS: 600}}, "A and C are inside too: three holders at once"},
		{"another lane does not count", []Span{{Lane: "other", Who: "A", StartMS: 0, EndMS: 800}, {Lane: "l", Who: "B", StartMS: 505, EndMS: 600}}, ""},
	} {
		if got := entryNote(c.spans, len(c.spans)-1); got != c.want {
			t.Errorf("%s: %q, want %q", c.why, got, c.want)
		}
	}
}

func TestDoubleGrants(t *testing.T) {
	for _, c := range []struct {
		why   string
		spans []Span
		want  int
	}{
		{"back to back", []Span{{Lane: "sku-1", Who: "w0", StartMS: 0, EndMS: 5}, {Lane: "sku-1", Who: "w1", StartMS: 5, EndMS: 9}}, 0},
		{"0.1 ms early", []Span{{Lane: "sku-1", Who: "w0", StartMS: 0, EndMS: 5}, {Lane: "sku-1", Who: "w1", StartMS: 4.9, EndMS: 9}}, 1},
		{"other skus", []Span{{Lane: "sku-1", Who: "w0", StartMS: 0, EndMS: 5}, {Lane: "sku-2", Who: "w1", StartMS: 1, EndMS: 9}}, 0},
		{"one long holder, two inside it", []Span{{Lane: "s", Who: "w0", StartMS: 0, EndMS: 100}, {Lane: "s", Who: "w1", StartMS: 10, EndMS: 20},
			{Lane: "s", Who: "w2", StartMS: 30, EndMS: 40}}, 2},
		{"recorded out of order", []Span{{Lane: "s", Who: "w1", StartMS: 10, EndMS: 20}, {Lane: "s", Who: "w0", StartMS: 0, EndMS: 15}}, 1},
	} {
		if got := DoubleGrants(c.spans); got != c.want {
			t.Errorf("%s: %d double grants, want %d", c.why, got, c.want)
		}
	}
}

// leaseHistory is the lease drill's fixed-lease part with B entering at
// bAt; A holds from 1 ms to 802.8 ms (its work), B for 100 ms.
func leaseHistory(bAt float64) *LeaseResult {
	r := &LeaseResult{Backend: "etcd", LeaseMS: 500, WorkMS: 800,
		history: history{Spans: []Span{
			{Lane: fixedLane, Who: "A", StartMS: 1, EndMS: 802.8},
			{Lane: fixedLane, Who: "B", StartMS: bAt, EndMS: bAt + 100},
		}},
		Fixed: []Event{
			{AtMS: 1, Who: "A", What: "acquired with a fixed lease of 500ms; starts 800ms of work", Span: 1},
			{AtMS: 498, Who: "A", What: "told: lock lost (lease context cancelled), work not finished"},
			{AtMS: 802.9, Who: "A", What: "work done, Unlock: lock lost"},
			{AtMS: bAt, Who: "B", What: "acquired", Span: 2},
		},
	}
	r.fromHistory()
	return r
}

// The lease drill: B entering after A left is not "two workers inside";
// B entering while A works is.
func TestLeaseSaysWhoIsInside(t *testing.T) {
	after := leaseHistory(803.3)
	if after.SecondHolderEnteredMS != 803.3 || after.BothInsideMS != 0 {
		t.Fatalf("from the history: entered %.1f, both inside %.1f ms", after.SecondHolderEnteredMS, after.BothInsideMS)
	}
	s := after.Summary()
	for _, bad := range []string{"two workers are inside", "two holders at once", "inside too"} {
		both(t, s, bad, true)
	}
	both(t, s, "acquired; alone inside: A's hold ended 0.5 ms before", false)
	both(t, s, "never: B entered 0.5 ms after A's hold ended", false)
	sameFigures(t, s)

	during := leaseHistory(505)
	if during.BothInsideMS != 100 {
		t.Fatalf("both inside %.1f ms, want B's 100 ms", during.BothInsideMS)
	}
	s = during.Summary()
	both(t, s, "acquired; A is inside too: two holders at once", false)
	both(t, s, "100.0 ms", false)
	both(t, s, "alone inside", true)
	sameFigures(t, s)
}

// The misdelete drill: C is "beside B" only if B is still inside when C
// enters.
func TestMisdeleteSaysWhoIsInside(t *testing.T) {
	mk := func(bEnd float64) *MisdeleteResult {
		r := &MisdeleteResult{LeaseMS: 200,
			history: history{Spans: []Span{
				{Lane: naiveLane, Who: "A", StartMS: 0.5, EndMS: 301.3},
				{Lane: naiveLane, Who: "B", StartMS: 301.1, EndMS: bEnd},
				{Lane: naiveLane, Who: "C", StartMS: 301.5, EndMS: 302},
			}},
			Naive: []Event{
				{AtMS: 0.5, Who: "A", What: "SET NX PX 200: acquired", Span: 1},
				{AtMS: 301.1, Who: "B", What: "SET NX PX: acquired (A's lease had expired)", Span: 2},
				{AtMS: 301.3, Who: "A", What: "resumes, DEL: 1 key deleted"},
				{AtMS: 301.5, Who: "C", What: "SET NX PX: acquired", Span: 3},
			},
		}
		r.fromHistory()
		return r
	}
	beside := mk(302.5)
	if beside.NaiveDoubleGrants != 2 {
		t.Fatalf("B beside A and C beside B: %d double grants, want 2", beside.NaiveDoubleGrants)
	}
	s := beside.Summary()
	both(t, s, "SET NX PX: acquired; B is inside too: two holders at once", false)
	if _, page := rendered(t, s); !strings.Contains(page, "C enters (B is inside too: two holders at once)") {
		t.Error("the enlarged window's title does not say C entered beside B")
	}
	sameFigures(t, s)

	gone := mk(301.4) // B left before C came
	if gone.NaiveDoubleGrants != 1 {
		t.Fatalf("only B beside A: %d double grants, want 1", gone.NaiveDoubleGrants)
	}
	s = gone.Summary()
	both(t, s, "SET NX PX: acquired; alone inside: B's hold ended 0.1 ms before", false)
	both(t, s, "B is inside too", true)
	if _, page := rendered(t, s); strings.Contains(page, "beside B") || !strings.Contains(page, "C enters (alone inside") {
		t.Error("the enlarged window's title still puts C beside B")
	}
	sameFigures(t, s)
}

// The contention drill: its witness figure counts overlaps in the spans.
func TestContentionSaysWhoIsInside(t *testing.T) {
	r := &ContentionResult{Backend: "redis", Workers: 2, Loops: 2, Acquisitions: 4,
		Spans: []Span{{Lane: "l", Who: "worker-0", StartMS: 0, EndMS: 2}, {Lane: "l", Who: "worker-1", StartMS: 2, EndMS: 4},
			{Lane: "l", Who: "worker-0", StartMS: 4, EndMS: 6}, {Lane: "l", Who: "worker-1", StartMS: 6, EndMS: 8}}}
	r.DoubleGrants = DoubleGrants(r.Spans)
	s := r.Summary()
	if r.DoubleGrants != 0 || s.Figures[2].Value != "0" {
		t.Fatalf("hand-offs back to back: %d double grants, figure %q", r.DoubleGrants, s.Figures[2].Value)
	}
	sameFigures(t, s)
	r.Spans[1].StartMS = 1.5
	r.DoubleGrants = DoubleGrants(r.Spans)
	if s = r.Summary(); s.Figures[2].Value != "1" {
		t.Fatalf("worker-1 in 0.5 ms early: figure %q, want 1", s.Figures[2].Value)
	}
	sameFigures(t, s)
}

// The pause drill: "both inside at once" is the spans' overlap.
func TestPauseSaysWhoIsInside(t *testing.T) {
	mk := func(aEnd float64) *PauseResult {
		r := &PauseResult{Backend: "etcd", LeaseMS: 300, PausedForMS: 600,
			history: history{Spans: []Span{{Lane: pauseLane, Who: "A", StartMS: 8, EndMS: aEnd}, {Lane: pauseLane, Who: "B", StartMS: 310, EndMS: 612}}},
			Timeline: []Event{
				{AtMS: 8, Who: "A", What: "acquired", Span: 1},
				{AtMS: 310, Who: "B", What: "acquired the expired lock, token 2", Span: 2},
			}}
		r.fromHistory()
		return r
	}
	frozen := mk(610)
	if frozen.OverlapMS != 300 || frozen.SecondHolderEnteredMS != 310 {
		t.Fatalf("overlap %.1f ms, B entered at %.1f", frozen.OverlapMS, frozen.SecondHolderEnteredMS)
	}
	both(t, frozen.Summary(), "token 2; A is inside too: two holders at once", false)
	sameFigures(t, frozen.Summary())
	left := mk(309)
	if left.OverlapMS != 0 {
		t.Fatalf("A left before B came: overlap %.1f ms", left.OverlapMS)
	}
	both(t, left.Summary(), "two holders", true)
	both(t, left.Summary(), "never: B entered 1.0 ms after A's hold ended", false)
}

// The redlock drill: a double grant is B entering while A's hold (A
// believing it holds the lock) is open.
func TestRedLockSaysWhoIsInside(t *testing.T) {
	mk := func(aEnd float64) *RedLockResult {
		r := &RedLockResult{Nodes: 5, LeaseMS: 5000,
			history: history{Spans: []Span{{Lane: "RedLock on 5 masters", Who: "A", StartMS: 15, EndMS: aEnd}, {Lane: "RedLock on 5 masters", Who: "B", StartMS: 25, EndMS: 450}}},
			Timeline: []Event{
				{AtMS: 15, Who: "A", What: "acquired on nodes 1-3", Span: 1},
				{AtMS: 25, Who: "B", What: "acquired on nodes 3-5: a quorum too", Span: 2},
			}}
		r.fromHistory()
		return r
	}
	if r := mk(440); !r.DoubleGrant {
		t.Fatal("B inside A's hold: no double grant")
	} else {
		both(t, r.Summary(), "a quorum too; A is inside too: two holders at once", false)
		sameFigures(t, r.Summary())
	}
	r := mk(20) // A's lease ended before B got in
	if r.DoubleGrant {
		t.Fatal("B after A's hold ended: a double grant")
	}
	both(t, r.Summary(), "two holders", true)
	both(t, r.Summary(), "alone inside: A's hold ended 5.0 ms before", false)
}

// The failover drills print the witness's count, the same in the text
// table and the HTML report.
func TestFailoverSummariesAgree(t *testing.T) {
	run := FailoverRun{Run: 1, Mode: ModePlain, FailoverCounts: FailoverCounts{Acquisitions: 120, WindowAcquisitions: 40, DoubleGrants: 7, Oversold: 3, FailoverMS: 2311}}
	var mode FailoverMode
	mode.add(run.FailoverCounts)
	r := &FailoverResult{Fault: "partition", Workers: 8, SKUs: 8, SectionMS: 2, LeaseMS: 2000, Replicas: 2,
		Runs: []FailoverRun{run}, order: []string{ModePlain}, Modes: map[string]FailoverMode{ModePlain: mode}}
	s := r.Summary()
	sameFigures(t, s)
	both(t, s, "17.5000%", false)
	c := &ConsensusFailoverResult{Backend: "etcd", Fault: "kill", Members: 3, Workers: 8, SKUs: 8,
		Runs:  []ConsensusRun{{Run: 1, Acquisitions: 50, DoubleGrants: 0, OldLeader: 1, NewLeader: 2, RestartError: "timeout"}},
		Total: ConsensusRun{Run: 1, Acquisitions: 50, OldLeader: -1, NewLeader: -1}}
	s = c.Summary()
	sameFigures(t, s)
	both(t, s, "m1→m2", false)
	both(t, s, "run 1: the killed leader did not rejoin in time: timeout", false)
}

// The sale's table and the lock signals come from the one table printer.
func TestSeckillSummary(t *testing.T) {
	r := &SeckillResult{Rows: []SeckillRow{{Strategy: "naive", Buyers: 5, Stock: 1, Sold: 5, Oversold: 4, Problems: []string{"oversold by 4 units"}},
		{Strategy: "lock", Buyers: 5, Stock: 1, Sold: 1, ReconcileClean: true, LeakedLockKeys: -1}}, Leftovers: "removed"}
	s := r.Summary()
	sameFigures(t, s)
	text, _ := rendered(t, s)
	for _, want := range []string{"  naive: oversold by 4 units\n", "PROBLEMS", "clean", "\nremoved\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if got := s.Tables[0].Rows[1][6]; got != "-" {
		t.Errorf("a leaked-key count the drill cannot see reads %q, want -", got)
	}
}
