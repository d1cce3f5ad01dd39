package drill

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/table"
	"github.com/dlockgo/dlock/faults"
)

// SoakResult is what a soak recorded and what its checks found.
type SoakResult struct {
	Backend    string  `json:"backend"`
	Shape      string  `json:"shape"`
	Workers    int     `json:"workers"`
	Names      int     `json:"names"`
	DurationMS float64 `json:"duration_ms"`
	WorkMS     float64 `json:"work_ms"`
	SessionMS  float64 `json:"session_ms"`
	EveryMS    float64 `json:"every_ms"`
	DownMS     float64 `json:"down_ms"`

	// The checks over the whole history: "ok", or what failed.
	Mutex  string `json:"mutex"`  // porcupine, mutex model, every name
	Fenced string `json:"fenced"` // porcupine, fenced-register model, every name
	Tokens string `json:"tokens"` // tokens grow with grants, none shared
	// DoubleGrants counts holds that began while another holder of the
	// same name still saw its lease held, as the independent witness saw
	// them.
	DoubleGrants int `json:"double_grants"`
	// PlainLostUpdates counts plain read-then-writes whose update was lost
	// (the counters' sum is short of the completed writes by that many).
	PlainLostUpdates int64 `json:"plain_lost_updates"`

	Acquisitions        int   `json:"acquisitions"`
	FailedAcquires      int   `json:"failed_acquires"`
	Releases            int   `json:"releases"`
	Losses              int   `json:"losses"`
	FencedWrites        int   `json:"fenced_writes"`
	StaleWritesRejected int   `json:"stale_writes_rejected"`
	PlainWrites         int64 `json:"plain_writes"`
	// StoreErrors counts writes the SQLite store failed (not a lock fault).
	StoreErrors int64 `json:"store_errors"`
	// Ops is the length of the checked history.
	Ops int `json:"ops"`

	Strikes []SoakFault `json:"faults"`   // every fault, in order
	PerKind []SoakFault `json:"per_kind"` // sums per kind (recovery and gap: the longest)

	spans  []Span
	marks  []Mark
	zooms  []Window
	gaps   []Window // the stretches whose holds the report leaves out
	lanes  []string // the names, in order
	points []Point  // where holders were told they lost their lock
	events []HistoryEvent
	start  time.Time // the wall time of the soak's clock's zero
}

// SoakFault is what one fault (or the sum of one kind's) did, from its
// strike to the next one.
type SoakFault struct {
	Kind   string  `json:"kind"`
	Target string  `json:"target,omitempty"`
	Count  int     `json:"count"`
	AtMS   float64 `json:"at_ms,omitempty"`
	DownMS float64 `json:"down_ms"`
	// HeldAtFault counts the holds open when it struck, HeldLost those of
	// them that ended in a loss signal (never more than HeldAtFault), Lost
	// every loss signal holders saw from the strike to the next fault's (of
	// holds granted after the strike too: it may exceed HeldAtFault).
	HeldAtFault    int `json:"held_at_fault"`
	HeldLost       int `json:"held_lost"`
	Lost           int `json:"lost"`
	Acquisitions   int `json:"acquisitions"`
	FailedAcquires int `json:"failed_acquires"`
	DoubleGrants   int `json:"double_grants"`
	StaleRejected  int `json:"stale_writes_rejected"`
	// RecoveryMS is the time from the fault's undoing to the next grant
	// (-1: none before the end; it may come after the next fault's
	// strike); LongestGapMS the longest stretch without a grant from the
	// strike to the next fault.
	RecoveryMS   float64 `json:"recovery_ms"`
	LongestGapMS float64 `json:"longest_gap_ms"`
	Error        string  `json:"error,omitempty"`
}

// OK reports whether every check passed: the history is linearizable as a
// mutex and as a fenced register per name, tokens grew, the witness saw no
// double grant and no plain update was lost.
func (r *SoakResult) OK() bool {
	return r.Mutex == "ok" && r.Fenced == "ok" && r.Tokens == "ok" && r.DoubleGrants == 0 && r.PlainLostUpdates == 0
}

// result checks the history and computes the figures.
func (s *soak) result(ctx context.Context, session, end time.Duration, schedErr error) (*SoakResult, error) {
	o := s.o
	r := &SoakResult{Backend: o.Backend, Shape: o.Shape, Workers: o.Workers, Names: o.Names, DurationMS: msf(end),
		WorkMS: msf(o.Work), SessionMS: msf(session), EveryMS: msf(o.Every), DownMS: msf(o.Down), StoreErrors: s.storeErrs}
	spans := s.tl.Spans()
	r.DoubleGrants = DoubleGrants(spans)
	var mutexErr, fencedErr, tokenErr []string
	var all []faults.Op
	lost := map[holdKey]bool{} // the holds that ended in a loss signal
	for _, name := range s.names {
		for _, op := range s.ops[name] {
			if op.Kind == faults.Lost {
				lost[holdKey{name, op.Client, op.Token}] = true
			}
		}
		ops := slices.Clone(s.ops[name])
		slices.SortStableFunc(ops, func(a, b faults.Op) int { return int(a.Call - b.Call) })
		r.Ops += len(ops)
		if err := faults.CheckMutex(ops); err != nil {
			mutexErr = append(mutexErr, name+": "+brief(err))
		}
		if err := faults.CheckFenced(ops); err != nil {
			fencedErr = append(fencedErr, name+": "+brief(err))
		}
		if err := faults.CheckTokens(ops); err != nil {
			tokenErr = append(tokenErr, name+": "+brief(err))
		}
		n, _, err := s.store.read(ctx, name)
		if err != nil {
			return nil, err
		}
		r.PlainWrites += s.plainDone[name]
		r.PlainLostUpdates += s.plainDone[name] - n
		all = append(all, ops...)
	}
	r.Mutex, r.Fenced, r.Tokens = checked(mutexErr), checked(fencedErr), checked(tokenErr)
	for _, op := range all {
		switch {
		case op.Kind == faults.Acquire && op.OK:
			r.Acquisitions++
		case op.Kind == faults.Acquire:
			r.FailedAcquires++
		case op.Kind == faults.Release:
			r.Releases++
		case op.Kind == faults.Lost:
			r.Losses++
		case op.Kind == faults.Write:
			r.FencedWrites++
			if !op.OK {
				r.StaleWritesRejected++
			}
		}
	}
	r.Strikes = soakStrikes(s.strike, spans, all, lost, end)
	r.PerKind = soakKinds(o.Faults, r.Strikes)
	if schedErr != nil {
		r.Strikes = append(r.Strikes, SoakFault{Kind: "schedule", Error: brief(schedErr)})
	}
	r.spans, r.marks, r.zooms, r.gaps = soakReport(s.strike, spans, session, end)
	r.lanes = s.names
	r.events, r.start = s.events, s.tl.start
	for name, ops := range s.ops {
		for _, op := range ops {
			if op.Kind == faults.Lost {
				r.points = append(r.points, Point{Lane: name, Who: op.Client, AtMS: msf(op.Return), Label: "told: lost"})
			}
		}
	}
	return r, nil
}

// holdKey names one hold: its lock name, holder and token.
type holdKey struct {
	name, who string
	token     int64
}

// soakStrikes computes each fault's figures over its stretch of the
// history: from its strike to the next one (the last: to end). lost holds
// the holds that ended in a loss signal.
func soakStrikes(strikes []soakStrike, spans []Span, ops []faults.Op, lost map[holdKey]bool, end time.Duration) []SoakFault {
	doubles := map[int]bool{}
	eachOverlap(spans, func(_, j int, _, _ float64) { doubles[j] = true })
	var out []SoakFault
	for i, st := range strikes {
		from, to := msf(st.At), msf(end)
		if i+1 < len(strikes) {
			to = msf(strikes[i+1].At)
		}
		undone := msf(st.Undone)
		f := SoakFault{Kind: st.Kind, Target: st.Target, Count: 1, AtMS: from, DownMS: undone - from, Error: st.Err, RecoveryMS: -1}
		for j, sp := range spans {
			if sp.StartMS <= from && sp.EndMS > from {
				f.HeldAtFault++
				if lost[holdKey{sp.Lane, sp.Who, sp.Token}] {
					f.HeldLost++
				}
			}
			if sp.StartMS >= from && sp.StartMS < to {
				f.Acquisitions++
				if doubles[j] {
					f.DoubleGrants++
				}
			}
			if sp.StartMS >= undone && (f.RecoveryMS < 0 || sp.StartMS-undone < f.RecoveryMS) {
				f.RecoveryMS = sp.StartMS - undone
			}
		}
		for _, op := range ops {
			if at := msf(op.Return); at < from || at >= to {
				continue
			}
			switch {
			case op.Kind == faults.Lost:
				f.Lost++
			case op.Kind == faults.Acquire && !op.OK:
				f.FailedAcquires++
			case op.Kind == faults.Write && !op.OK:
				f.StaleRejected++
			}
		}
		f.LongestGapMS = longestGap(spans, from, to)
		out = append(out, f)
	}
	return out
}

// soakKinds sums the strikes per kind, in the schedule's order.
func soakKinds(kinds []string, strikes []SoakFault) []SoakFault {
	var out []SoakFault
	for _, k := range kinds {
		sum := SoakFault{Kind: k, RecoveryMS: -1}
		for _, f := range strikes {
			if f.Kind != k {
				continue
			}
			sum.Count++
			sum.DownMS = max(sum.DownMS, f.DownMS)
			sum.HeldAtFault += f.HeldAtFault
			sum.HeldLost += f.HeldLost
			sum.Lost += f.Lost
			sum.Acquisitions += f.Acquisitions
			sum.FailedAcquires += f.FailedAcquires
			sum.DoubleGrants += f.DoubleGrants
			sum.StaleRejected += f.StaleRejected
			sum.RecoveryMS = max(sum.RecoveryMS, f.RecoveryMS)
			sum.LongestGapMS = max(sum.LongestGapMS, f.LongestGapMS)
			if sum.Error == "" {
				sum.Error = f.Error
			}
		}
		if sum.Count > 0 {
			out = append(out, sum)
		}
	}
	return out
}

// Around each fault the report draws the holds from reportBefore before
// its strike to reportAfter after its undoing.
const (
	reportBefore = 300.0  // ms
	reportAfter  = 1000.0 // ms
)

// soakReport keeps, for the HTML report, the spans around each fault (from
// reportBefore before its strike to reportAfter after its undoing, at most
// 6000 in all, shared evenly between the faults), a mark at every strike
// and undoing, an enlarged window on the first strike of each kind, and
// the stretches left out (gaps: from the start, between the faults, to the
// end, and, where a fault's window has more spans than its share, from the
// first span left out to the window's end), which the report marks as such.
func soakReport(strikes []soakStrike, spans []Span, session, end time.Duration) ([]Span, []Mark, []Window, []Window) {
	var marks []Mark
	var zooms []Window
	seen := map[string]bool{}
	for _, st := range strikes {
		marks = append(marks, Mark{AtMS: msf(st.At), Label: st.Kind + " " + st.Target}, Mark{AtMS: msf(st.Undone), Label: "undone"})
		if !seen[st.Kind] {
			seen[st.Kind] = true
			zooms = append(zooms, Window{Title: fmt.Sprintf("The first %s, enlarged", st.Kind), FromMS: msf(st.At) - reportBefore, ToMS: msf(st.Undone) + msf(session)/2})
		}
	}
	var out []Span
	var gaps []Window
	taken := map[int]bool{}
	each := 6000 / max(1, len(strikes))
	for _, st := range strikes {
		n := 0
		for i, sp := range spans {
			if taken[i] || sp.EndMS < msf(st.At)-reportBefore || sp.StartMS > msf(st.Undone)+reportAfter {
				continue
			}
			if n == each {
				// The share is drawn: the rest of this window (spans are
				// in start order) is marked, not silently dropped.
				if to := msf(st.Undone) + reportAfter; to > sp.StartMS {
					gaps = append(gaps, Window{Title: "holds not drawn", FromMS: sp.StartMS, ToMS: to})
				}
				break
			}
			taken[i] = true
			out = append(out, sp)
			n++
		}
	}
	slices.SortStableFunc(out, func(a, b Span) int { return cmp.Compare(a.StartMS, b.StartMS) })
	from := 0.0
	for _, st := range strikes {
		if to := msf(st.At) - reportBefore; to > from {
			gaps = append(gaps, Window{Title: "holds not drawn", FromMS: from, ToMS: to})
		}
		from = max(from, msf(st.Undone)+reportAfter)
	}
	if len(strikes) > 0 && msf(end) > from {
		gaps = append(gaps, Window{Title: "holds not drawn", FromMS: from, ToMS: msf(end)})
	}
	slices.SortStableFunc(gaps, func(a, b Window) int { return cmp.Compare(a.FromMS, b.FromMS) })
	return out, marks, zooms, gaps
}

func checked(errs []string) string {
	if len(errs) == 0 {
		return "ok"
	}
	return strings.Join(errs, "; ")
}

// brief is the first line of err, at most 300 bytes: porcupine's errors
// list the whole history.
func brief(err error) string {
	s := firstLine(err.Error())
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// Summary returns what the text and the HTML report show: the verdict,
// the totals, every fault and the sums per kind, and who held what around
// the faults.
func (r *SoakResult) Summary() *Summary {
	verdictLine := "every check passed"
	if !r.OK() {
		verdictLine = "FAILED: the history breaks a check below"
	}
	figs := []Figure{
		{"verdict", verdictLine},
		{"mutex (porcupine, per name)", r.Mutex},
		{"fenced register (porcupine, per name)", r.Fenced},
		{"fencing tokens", r.Tokens},
		{"double grants (witness)", strconv.Itoa(r.DoubleGrants)},
		{"plain updates lost", fmt.Sprintf("%d of %d", r.PlainLostUpdates, r.PlainWrites)},
		{"acquisitions", fmt.Sprintf("%d (%s)", r.Acquisitions, plural(r.FailedAcquires, "failed attempt"))},
		{"holds ended", fmt.Sprintf("%d released, %d lost", r.Releases, r.Losses)},
		{"fenced writes", fmt.Sprintf("%d (%d rejected as stale)", r.FencedWrites, r.StaleWritesRejected)},
		{"operations checked", strconv.Itoa(r.Ops)},
	}
	if r.StoreErrors > 0 {
		figs = append(figs, Figure{"store errors", strconv.FormatInt(r.StoreErrors, 10)})
	}
	perFault, perKind := soakTable(r.Strikes, true), soakTable(r.PerKind, false)
	perKind.Title, perFault.Title = "per kind of fault (the sums of its faults below):", "every fault (each counted from its strike to the next fault's):"
	perKind.Notes = []string{
		`"held at strike": the holds open when the fault struck; "of them lost": those that ended in a loss signal;`,
		`"losses": every loss signal from the strike to the next fault's, of holds granted after the strike too.`,
	}
	return &Summary{
		Title: fmt.Sprintf("soak on %s: %s on %s (%s), %.0f ms inside the lock, session %.0f ms, a fault every %.0f ms for %.0f ms, %.0f s",
			r.Backend, plural(r.Workers, "worker"), plural(r.Names, "name"), r.Shape, r.WorkMS, r.SessionMS, r.EveryMS, r.DownMS, r.DurationMS/1000),
		Figures:       figs,
		Tables:        []table.Table{perKind, perFault},
		TimelineTitle: "Who held each name around the faults (double grants in red)",
		Spans:         r.spans, Marks: r.marks, Zooms: r.zooms, Points: r.points, Gaps: r.gaps, Lanes: r.lanes,
	}
}

// soakTable lays out faults: one per row (each with its time and target),
// or the sums per kind (with the number of strikes).
func soakTable(rows []SoakFault, each bool) table.Table {
	ms := func(v float64) string {
		if v < 0 {
			return "none"
		}
		return fmt.Sprintf("%.0f", v)
	}
	var cols []table.Column[SoakFault]
	if each {
		cols = append(cols,
			table.Col("at ms", func(f SoakFault) string { return ms(f.AtMS) }),
			table.Col("fault", func(f SoakFault) string { return f.Kind }),
			table.Col("target", func(f SoakFault) string { return f.Target }))
	} else {
		cols = append(cols,
			table.Col("fault", func(f SoakFault) string { return f.Kind }),
			table.Col("times", func(f SoakFault) string { return strconv.Itoa(f.Count) }))
	}
	cols = append(cols,
		table.Col("held at strike", func(f SoakFault) string { return strconv.Itoa(f.HeldAtFault) }),
		table.Col("of them lost", func(f SoakFault) string { return strconv.Itoa(f.HeldLost) }),
		table.Col("losses", func(f SoakFault) string { return strconv.Itoa(f.Lost) }),
		table.Col("acquisitions", func(f SoakFault) string { return strconv.Itoa(f.Acquisitions) }),
		table.Col("failed acquires", func(f SoakFault) string { return strconv.Itoa(f.FailedAcquires) }),
		table.Col("double grants", func(f SoakFault) string { return strconv.Itoa(f.DoubleGrants) }),
		table.Col("stale rejected", func(f SoakFault) string { return strconv.Itoa(f.StaleRejected) }),
		table.Col("recovery ms", func(f SoakFault) string { return ms(f.RecoveryMS) }),
		table.Col("longest gap ms", func(f SoakFault) string { return ms(f.LongestGapMS) }),
		table.Col("error", func(f SoakFault) string { return f.Error }))
	return table.Of(cols, rows)
}
