package drill

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/faults"
)

// soakOf returns a soak on one name whose history is ops and spans (times
// in ms), with one pause struck at 3 ms and undone at 9 ms.
func soakOf(t *testing.T, ops []faults.Op, spans []Span, plainDone int64) *soak {
	t.Helper()
	st, err := openSoakStore(context.Background(), t.TempDir(), 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	if err := st.plainIncrement(context.Background(), st.names[0], 0); err != nil {
		t.Fatal(err)
	}
	s := newSoak(SoakOptions{Backend: "redis", Faults: []string{FaultPause}}, st)
	s.tl, s.plainDone[st.names[0]] = NewTimeline(), plainDone
	s.strike = []soakStrike{{Kind: FaultPause, Target: "redis-server", At: 3 * time.Millisecond, Undone: 9 * time.Millisecond}}
	for _, op := range ops {
		s.add(st.names[0], op)
	}
	for _, sp := range spans {
		sp.Lane = st.names[0]
		s.tl.spans, s.tl.open = append(s.tl.spans, sp), append(s.tl.open, false)
	}
	return s
}

func op(kind faults.Kind, who string, token int64, ok bool, call, ret float64) faults.Op {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	return faults.Op{Kind: kind, Client: who, Token: token, OK: ok, Call: ms(call), Return: ms(ret)}
}

// The soak's checks fail a history that breaks them: w1 granted while w0
// still held (a double grant: mutex and witness), w0's write accepted
// after w1's higher token (fenced register), a token granted twice, and a
// plain update lost; the fault's figures come from the same history.
func TestSoakChecksFailABadHistory(t *testing.T) {
	s := soakOf(t, []faults.Op{
		op(faults.Acquire, "w0", 1, true, 0, 1),
		op(faults.Write, "w0", 1, true, 2, 3),
		op(faults.Acquire, "w1", 2, true, 4, 5),
		op(faults.Write, "w1", 2, true, 6, 7),
		op(faults.Write, "w0", 1, true, 8, 9),
		op(faults.Release, "w0", 1, true, 10, 11),
		op(faults.Release, "w1", 2, true, 12, 13),
		op(faults.Acquire, "w2", 1, true, 30, 31),
		op(faults.Release, "w2", 1, true, 32, 33),
		op(faults.Read, "reader", 2, true, 40, 41),
	}, []Span{{Who: "w0", StartMS: 1, EndMS: 10}, {Who: "w1", StartMS: 5, EndMS: 12}, {Who: "w2", StartMS: 31, EndMS: 32}}, 2)
	r, err := s.result(context.Background(), 2*time.Second, 50*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() {
		t.Fatalf("a history with a double grant passed: %+v", r)
	}
	for what, got := range map[string]string{"mutex": r.Mutex, "fenced register": r.Fenced} {
		if !strings.Contains(got, "not linearizable") {
			t.Errorf("%s: %q, want not linearizable", what, got)
		}
	}
	if !strings.Contains(r.Tokens, "token 1 granted to w0 and w2") {
		t.Errorf("tokens: %q", r.Tokens)
	}
	if r.DoubleGrants != 1 || r.PlainLostUpdates != 1 || r.Acquisitions != 3 || r.StaleWritesRejected != 0 {
		t.Errorf("double grants %d (want 1), plain updates lost %d (want 1), acquisitions %d (want 3), stale %d (want 0)",
			r.DoubleGrants, r.PlainLostUpdates, r.Acquisitions, r.StaleWritesRejected)
	}
	if len(r.Strikes) != 1 {
		t.Fatalf("strikes %+v", r.Strikes)
	}
	f := r.Strikes[0]
	if f.HeldAtFault != 1 || f.Acquisitions != 2 || f.DoubleGrants != 1 || f.RecoveryMS != 22 || f.DownMS != 6 {
		t.Errorf("the pause's figures: %+v (want 1 held, 2 acquisitions, 1 double grant, recovery 22 ms, down 6 ms)", f)
	}
	if text, _ := rendered(t, r.Summary()); !strings.Contains(text, "FAILED") {
		t.Errorf("the text does not say the soak failed:\n%s", text)
	}
}

// The same holds one after another pass every check.
func TestSoakChecksPassAGoodHistory(t *testing.T) {
	s := soakOf(t, []faults.Op{
		op(faults.Acquire, "w0", 1, true, 0, 1),
		op(faults.Write, "w0", 1, true, 2, 3),
		op(faults.Lost, "w0", 1, false, 4, 6), // last seen held at 4, told at 6
		op(faults.Acquire, "w1", 2, true, 5, 7),
		op(faults.Write, "w1", 2, true, 8, 9),
		op(faults.Release, "w1", 2, true, 12, 13),
		op(faults.Acquire, "w2", 3, true, 30, 31),
		op(faults.Write, "w0", 1, false, 32, 32.5), // stale: rejected
		op(faults.Release, "w2", 3, true, 33, 34),
		op(faults.Read, "reader", 2, true, 40, 41),
	}, []Span{{Who: "w0", StartMS: 1, EndMS: 4}, {Who: "w1", StartMS: 7, EndMS: 12}, {Who: "w2", StartMS: 31, EndMS: 33}}, 1)
	r, err := s.result(context.Background(), 2*time.Second, 50*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() || r.Losses != 1 || r.StaleWritesRejected != 1 {
		t.Fatalf("mutex %q, fenced %q, tokens %q, double grants %d, lost updates %d, losses %d, stale %d",
			r.Mutex, r.Fenced, r.Tokens, r.DoubleGrants, r.PlainLostUpdates, r.Losses, r.StaleWritesRejected)
	}
	if f := r.Strikes[0]; f.Lost != 1 || f.HeldAtFault != 1 {
		t.Errorf("the pause's figures: %+v (want 1 held at the fault, 1 lost)", f)
	}
}

// The per-fault figures say what they count — a hold open at the strike and
// lost counts in "held at strike" and "of them lost", a hold granted after
// the strike and lost only in "losses" — and the report orders the names
// soak-0, soak-1, … whatever order they first appear in, and marks the
// stretches it leaves out (before the first fault, between the faults,
// after the last) instead of leaving them blank.
func TestSoakFiguresAndReport(t *testing.T) {
	ctx := context.Background()
	st, err := openSoakStore(ctx, t.TempDir(), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	s := newSoak(SoakOptions{Backend: "redis", Faults: []string{FaultPause, FaultKill}}, st)
	s.tl = NewTimeline()
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	s.strike = []soakStrike{
		{Kind: FaultPause, Target: "redis-server", At: ms(1000), Undone: ms(1500)},
		{Kind: FaultKill, Target: "redis-server", At: ms(5000), Undone: ms(5500)},
	}
	// First seen in the order soak-2, soak-1, soak-0, soak-3.
	holds := []struct {
		name, who  string
		token      int64
		start, end float64
		lost       bool
	}{
		{"soak-2", "w0", 1, 100, 1200, true},   // open at the pause, lost
		{"soak-1", "w1", 2, 1600, 1800, true},  // granted after the pause, lost
		{"soak-0", "w2", 3, 4800, 5200, false}, // open at the kill, released
		{"soak-3", "w3", 4, 6000, 6100, false},
	}
	for _, h := range holds {
		s.add(h.name, op(faults.Acquire, h.who, h.token, true, h.start-1, h.start))
		end := op(faults.Release, h.who, h.token, true, h.end, h.end+1)
		if h.lost {
			end = op(faults.Lost, h.who, h.token, false, h.end, h.end+1)
		}
		s.add(h.name, end)
		s.tl.spans = append(s.tl.spans, Span{Lane: h.name, Who: h.who, Token: h.token, StartMS: h.start, EndMS: h.end})
		s.tl.open = append(s.tl.open, false)
	}
	r, err := s.result(ctx, 2*time.Second, ms(8000), nil)
	if err != nil {
		t.Fatal(err)
	}
	pause, kill := r.Strikes[0], r.Strikes[1]
	if pause.HeldAtFault != 1 || pause.HeldLost != 1 || pause.Lost != 2 {
		t.Errorf("the pause: held at strike %d, of them lost %d, losses %d; want 1, 1, 2", pause.HeldAtFault, pause.HeldLost, pause.Lost)
	}
	if kill.HeldAtFault != 1 || kill.HeldLost != 0 || kill.Lost != 0 {
		t.Errorf("the kill: held at strike %d, of them lost %d, losses %d; want 1, 0, 0", kill.HeldAtFault, kill.HeldLost, kill.Lost)
	}
	text, page := rendered(t, r.Summary())
	for _, want := range []string{"held at strike", "of them lost", "losses", "from its strike to the next fault's"} {
		if !strings.Contains(text, want) {
			t.Errorf("the text does not say %q:\n%s", want, text)
		}
	}
	lanes := regexp.MustCompile(`class="lane-label"[^>]*>([^<]+)<`).FindAllStringSubmatch(page, -1)
	var order []string
	for _, m := range lanes {
		if !slices.Contains(order, m[1]) {
			order = append(order, m[1])
		}
	}
	if want := []string{"soak-0", "soak-1", "soak-2", "soak-3"}; !slices.Equal(order, want) {
		t.Errorf("the report's name groups: %v, want %v", order, want)
	}
	// Drawn around each fault: 300 ms before its strike to 1 s after its
	// undoing; the rest is marked.
	gaps := regexp.MustCompile(`class="gap"[^>]*><title>holds not drawn: (\d+) – (\d+) ms</title>`).FindAllStringSubmatch(page, -1)
	var got []string
	for _, g := range gaps {
		got = append(got, g[1]+"-"+g[2])
	}
	for _, want := range []string{"0-700", "2500-4700", "6500-8000"} {
		if !slices.Contains(got, want) {
			t.Errorf("no gap marker for %s ms in the report (markers: %v)", want, got)
		}
	}
	if !strings.Contains(page, "not drawn: the holds between the stretches shown") {
		t.Error("the report's key does not explain the gap marker")
	}
}

// TestSoakReportMarksBeyondCap: a fault's window with more spans than its
// share of the report's 6000 draws the share and marks the rest of the
// window "not drawn" (from the first span left out to the window's end)
// instead of leaving it blank as if nobody held the lock.
func TestSoakReportMarksBeyondCap(t *testing.T) {
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	strikes := []soakStrike{{Kind: FaultPause, Target: "redis-server", At: ms(1000), Undone: ms(1500)}}
	// 7000 spans, in start order, 0.2 ms apart from the window's start
	// (700 ms): the 6001st starts at 1900 ms, the window ends at 2500 ms.
	var spans []Span
	for i := range 7000 {
		start := 700 + float64(i)*0.2
		spans = append(spans, Span{Lane: "soak-0", Who: "w0", Token: int64(i + 1), StartMS: start, EndMS: start + 0.1})
	}
	out, _, _, gaps := soakReport(strikes, spans, 2*time.Second, ms(4000))
	if len(out) != 6000 {
		t.Errorf("%d spans drawn, want the share, 6000", len(out))
	}
	var got []string
	covered := false
	for _, g := range gaps {
		got = append(got, fmt.Sprintf("%.0f-%.0f", g.FromMS, g.ToMS))
		if g.FromMS <= spans[6000].StartMS+1e-9 && g.ToMS >= 2500 {
			covered = true
		}
	}
	if !covered {
		t.Errorf("the window's spans past the cap (from %.1f ms to 2500 ms) are not marked (gaps: %v)", spans[6000].StartMS, got)
	}
	if !slices.Contains(got, "0-700") || !slices.Contains(got, "2500-4000") {
		t.Errorf("gaps %v, want 0-700 and 2500-4000 besides", got)
	}
}

// TestSoakHistoryOnlyWhenAsked: a soak keeps its events only under
// SoakOptions.History (--history): the hot path takes no lock for them
// otherwise, and the run's memory does not grow with them.
func TestSoakHistoryOnlyWhenAsked(t *testing.T) {
	for _, history := range []bool{false, true} {
		s := newSoak(SoakOptions{Backend: "redis", History: history}, &soakStore{})
		s.event(time.Millisecond, "w0", "soak-0", OpAcquire, EvInvoke, 0, nil)
		s.lostEvent(2*time.Millisecond, time.Millisecond, "w0", "soak-0", 1)
		if want := map[bool]int{false: 0, true: 2}[history]; len(s.events) != want {
			t.Errorf("History %v: %d events kept, want %d", history, len(s.events), want)
		}
	}
}
