package drill

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/table"
)

// SoakSeries is the sum of soaks run one after another with the same
// options (dlock drill soak --runs), each on servers of its own, perhaps
// beside busy processes that keep the CPU saturated (--busy): a run that
// fails one time in twenty shows in thirty.
type SoakSeries struct {
	Backend      string    `json:"backend"`
	DurationMS   float64   `json:"duration_ms"` // of each run
	Faults       []string  `json:"faults"`
	FastElection bool      `json:"fast_election,omitempty"`
	Busy         int       `json:"busy"` // busy processes beside the runs
	Runs         []SoakRun `json:"runs"`

	Passed       int `json:"passed"`
	DoubleGrants int `json:"double_grants"`
	// MutexFailures, FencedFailures and TokenFailures count the runs whose
	// history failed porcupine's mutex model, its fenced-register model,
	// and the tokens' order.
	MutexFailures    int   `json:"mutex_failures"`
	FencedFailures   int   `json:"fenced_failures"`
	TokenFailures    int   `json:"token_failures"`
	PlainLostUpdates int64 `json:"plain_lost_updates"`
	PlainWrites      int64 `json:"plain_writes"`
	Acquisitions     int   `json:"acquisitions"`
	FailedAcquires   int   `json:"failed_acquires"`
	Losses           int   `json:"losses"`
	Strikes          int   `json:"strikes"`
	// ByKind counts the strikes of each kind of fault.
	ByKind map[string]int `json:"strikes_by_kind"`
	Ops    int            `json:"ops"`
}

// SoakRun is one run of a SoakSeries.
type SoakRun struct {
	Run              int      `json:"run"`
	OK               bool     `json:"ok"`
	Mutex            string   `json:"mutex"`
	Fenced           string   `json:"fenced"`
	Tokens           string   `json:"tokens"`
	DoubleGrants     int      `json:"double_grants"`
	PlainLostUpdates int64    `json:"plain_lost_updates"`
	Acquisitions     int      `json:"acquisitions"`
	Losses           int      `json:"losses"`
	Strikes          int      `json:"strikes"`
	Faults           []string `json:"faults"` // the kinds that struck, in order
	Ops              int      `json:"ops"`
}

// NewSoakSeries returns the empty series of soaks of o beside busy busy
// processes.
func NewSoakSeries(o SoakOptions, busy int) (*SoakSeries, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	return &SoakSeries{Backend: o.Backend, DurationMS: msf(o.Duration), Faults: o.Faults, FastElection: o.FastElection, Busy: busy}, nil
}

// Add sums up r, the next run, and returns its line.
func (s *SoakSeries) Add(r *SoakResult) SoakRun {
	run := SoakRun{Run: len(s.Runs) + 1, OK: r.OK(), Mutex: r.Mutex, Fenced: r.Fenced, Tokens: r.Tokens,
		DoubleGrants: r.DoubleGrants, PlainLostUpdates: r.PlainLostUpdates, Acquisitions: r.Acquisitions,
		Losses: r.Losses, Strikes: len(r.Strikes), Ops: r.Ops}
	if s.ByKind == nil {
		s.ByKind = map[string]int{}
	}
	for _, f := range r.Strikes {
		run.Faults = append(run.Faults, f.Kind)
		s.ByKind[f.Kind]++
	}
	s.Runs = append(s.Runs, run)
	if run.OK {
		s.Passed++
	}
	s.DoubleGrants += r.DoubleGrants
	s.MutexFailures += failed(r.Mutex)
	s.FencedFailures += failed(r.Fenced)
	s.TokenFailures += failed(r.Tokens)
	s.PlainLostUpdates += r.PlainLostUpdates
	s.PlainWrites += r.PlainWrites
	s.Acquisitions += r.Acquisitions
	s.FailedAcquires += r.FailedAcquires
	s.Losses += r.Losses
	s.Strikes += len(r.Strikes)
	s.Ops += r.Ops
	return run
}

func failed(check string) int {
	if check == "ok" {
		return 0
	}
	return 1
}

// OK reports whether every run passed every check.
func (s *SoakSeries) OK() bool { return len(s.Runs) > 0 && s.Passed == len(s.Runs) }

// Line is the run's line as the series prints it.
func (r SoakRun) Line(of int) string {
	verdict := "all passed"
	if !r.OK {
		var bad []string
		for _, c := range []struct{ name, v string }{{"mutex", r.Mutex}, {"fenced", r.Fenced}, {"tokens", r.Tokens}} {
			if c.v != "ok" {
				bad = append(bad, c.name+": "+c.v)
			}
		}
		if r.DoubleGrants > 0 {
			bad = append(bad, fmt.Sprintf("%d double grants", r.DoubleGrants))
		}
		if r.PlainLostUpdates > 0 {
			bad = append(bad, fmt.Sprintf("%d plain updates lost", r.PlainLostUpdates))
		}
		verdict = "FAILED: " + strings.Join(bad, "; ")
	}
	return fmt.Sprintf("run %d of %d: %s (%s acquisitions, faults %s, %d holds lost and told, %s operations checked)",
		r.Run, of, verdict, strconv.Itoa(r.Acquisitions), strings.Join(r.Faults, ", "), r.Losses, strconv.Itoa(r.Ops))
}

// WriteText writes the series' totals.
func (s *SoakSeries) WriteText(w io.Writer) error {
	elect := ""
	if s.FastElection {
		elect = ", fast election"
	}
	t := table.Table{
		Title: fmt.Sprintf("%d runs of %v on %s (faults: %s%s), %d busy processes beside them",
			len(s.Runs), time.Duration(s.DurationMS*float64(time.Millisecond)), s.Backend, strings.Join(s.Faults, ", "), elect, s.Busy),
		Rows: [][]string{
			{"runs passed", fmt.Sprintf("%d of %d", s.Passed, len(s.Runs))},
			{"double grants (witness)", strconv.Itoa(s.DoubleGrants)},
			{"porcupine failures", fmt.Sprintf("%d mutex, %d fenced register", s.MutexFailures, s.FencedFailures)},
			{"token order failures", strconv.Itoa(s.TokenFailures)},
			{"plain updates lost", fmt.Sprintf("%d of %s", s.PlainLostUpdates, strconv.FormatInt(s.PlainWrites, 10))},
			{"holds lost", fmt.Sprintf("%s, each told before its lock went to anyone else (the mutex model)", strconv.Itoa(s.Losses))},
			{"acquisitions", fmt.Sprintf("%s (%s failed attempts)", strconv.Itoa(s.Acquisitions), strconv.Itoa(s.FailedAcquires))},
			{"faults struck", s.struck()},
			{"operations checked", strconv.Itoa(s.Ops)},
		},
	}
	return t.Write(w)
}

// struck is the strikes, in all and by kind (in the order of Faults).
func (s *SoakSeries) struck() string {
	var by []string
	for _, k := range s.Faults {
		if n := s.ByKind[k]; n > 0 {
			by = append(by, fmt.Sprintf("%s %d", k, n))
		}
	}
	return fmt.Sprintf("%d (%s)", s.Strikes, strings.Join(by, ", "))
}
