package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/bench/internal/libs"
	"github.com/dlockgo/dlock/bench/internal/measure"
	"github.com/dlockgo/dlock/bench/internal/servers"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if servers.ServeEtcdChild() { // this test binary, re-executed as the etcd child
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// short is a configuration that runs every scenario in about a second.
func short() Config {
	c := Defaults()
	c.Duration, c.Warmup, c.Rounds = 150*time.Millisecond, 50*time.Millisecond, 1
	c.Workers = 16
	c.Wait = 2 * time.Second // bounds the drain after a window
	// A lease far above the timer lateness of a loaded 2-core machine
	// under -race: renewed at 667 ms and 1333 ms.
	c.Holds, c.HoldFor, c.HoldLease = 300, 1500*time.Millisecond, 2*time.Second
	c.RedLockWorkers = 4
	c.ScaleHolds, c.Names, c.Waiters, c.WaiterClients = []int{400}, 100, 40, 8
	return c
}

// Every scenario runs for every library against real servers, and the
// numbers hold together: no overlap, no lock lost, every row acquired, the
// command counts add up, every long hold was kept and renewed.
func TestEveryScenarioRuns(t *testing.T) {
	cfg := short()
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tables) != len(scenarios(cfg)) {
		t.Fatalf("%d tables, want %d", len(rep.Tables), len(scenarios(cfg)))
	}
	want := map[string]int{}
	for _, sc := range scenarios(cfg) {
		want[sc.ID] = len(sc.Entries)
	}
	for _, tb := range rep.Tables {
		if len(tb.Rows) != want[tb.ID] {
			t.Errorf("%s: %d rows, want %d", tb.ID, len(tb.Rows), want[tb.ID])
		}
		for _, r := range tb.Rows {
			name := tb.ID + ", " + r.label()
			if len(r.Runs) != cfg.Rounds {
				t.Errorf("%s: %d runs, want %d", name, len(r.Runs), cfg.Rounds)
				continue
			}
			run := r.Runs[0]
			if r.Overlaps != 0 {
				t.Errorf("%s: %d overlaps: two holders at once", name, r.Overlaps)
			}
			// A peer's waiter may starve past its wait budget (a measured
			// failure, not a harness fault); a lock lost while held may not.
			if run.UnlockErrs != 0 {
				t.Errorf("%s: %d failed releases (first error: %s)", name, run.UnlockErrs, run.FirstError)
			}
			// A peer with its default retry may starve through a short
			// window on a loaded machine (measured, not a harness fault);
			// dlock's rows and the floors must always acquire.
			if run.Acquisitions == 0 && (r.Lib == "dlock" || r.Floor) {
				t.Errorf("%s: no acquisition", name)
			}
			if r.Client != "etcd" && r.Client != zkClient && run.Commands <= 0 {
				t.Errorf("%s: no Redis command counted", name)
			}
			if r.Floor && (run.Commands < 2*run.Acquisitions || run.Commands > 2*run.Acquisitions+2) {
				// Each counted pair is two PINGs; a pair cut by the end of
				// the window may add its two uncounted.
				t.Errorf("%s: %d commands for %d PING pairs", name, run.Commands, run.Acquisitions)
			}
			if tb.Holds {
				checkHolds(t, name, cfg, tb.Workers, r, run)
			}
			if tb.ID == "waiters" && r.Lib == "dlock" && run.RedisKeyBytes <= 0 {
				t.Errorf("%s: no key memory sampled", name)
			}
		}
		if !tb.Holds && tb.Rows[0].Lib == "floor" && tb.Rows[0].VsFloor != 1 {
			t.Errorf("%s: floor is %v× itself", tb.ID, tb.Rows[0].VsFloor)
		}
	}
	var md bytes.Buffer
	rep.WriteMarkdown(&md)
	for _, tb := range rep.Tables {
		if !strings.Contains(md.String(), "### "+tb.Title) {
			t.Errorf("Markdown lacks the table %q", tb.Title)
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatalf("report does not marshal: %v", err)
	}
}

func checkHolds(t *testing.T, name string, cfg Config, holds int, r *Row, run Measurement) {
	t.Helper()
	if run.Held != holds || run.Lost != 0 {
		t.Errorf("%s: held %d, lost %d; want %d, 0", name, run.Held, run.Lost, holds)
	}
	// Every library here reports a loss; after FLUSHALL each must.
	if run.LossSeen != run.Held || run.LossMax <= 0 {
		t.Errorf("%s: %d of %d holders reported the FLUSHALL (max %.0f ms)", name, run.LossSeen, run.Held, run.LossMax)
	}
	// (the heap per hold is not checked: at a few hundred holds the
	// previous run's garbage still being freed outweighs it)
	if run.RedisKeyBytes <= 0 {
		t.Errorf("%s: %d B in Redis keys", name, run.RedisKeyBytes)
	}
	// HoldFor/(lease/3) = 2 renewal ticks; demand at least half of them,
	// since timers run late on a loaded machine.
	ticks := int64(cfg.HoldFor / (cfg.HoldLease / 3))
	if min := int64(holds) * ticks / 2; run.ScriptCalls < min {
		t.Errorf("%s: %d renewals in %v, want >= %d", name, run.ScriptCalls, cfg.HoldFor, min)
	}
	if r.Lib == "dlock" {
		// The watchdog renews in pipelines of 256: far fewer round trips
		// than renewals.
		batches := int64((holds + 255) / 256)
		if run.RoundTrips < 1 || run.RoundTrips > batches*(ticks+2) {
			t.Errorf("%s: %d renewal round trips for %d ticks of %d batches", name, run.RoundTrips, ticks, batches)
		}
	}
}

// Rounds alternate the order of the libraries, and a row reports the median.
func TestRoundsAlternate(t *testing.T) {
	cfg := short()
	cfg.Rounds = 2
	cfg.Scenarios, cfg.Libs = []string{"uncontended"}, []string{"floor"}
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	rows := rep.Tables[0].Rows
	if len(rows) != 2 {
		t.Fatalf("%d rows, want the 2 floors", len(rows))
	}
	first, second := rows[0].Runs, rows[1].Runs
	if first[0].Order != 1 || first[1].Order != 2 || second[0].Order != 2 || second[1].Order != 1 {
		t.Fatalf("orders %d,%d and %d,%d; want 1,2 and 2,1", first[0].Order, first[1].Order, second[0].Order, second[1].Order)
	}
	a, b := first[0].AcqPerSec(), first[1].AcqPerSec()
	if got := rows[0].Median.AcqPerSec; got != (a+b)/2 {
		t.Fatalf("median of %v and %v = %v", a, b, got)
	}
}

// noLock is a deliberately broken lock: it lets everyone in.
type noLock struct{}

func (noLock) Lock(context.Context) error   { return nil }
func (noLock) Unlock(context.Context) error { return nil }

// Over many names, the witness is per name: workers that each hold a
// different name never overlap, and a lock that does not exclude is caught.
func TestDriveManyNames(t *testing.T) {
	sc := Scenario{Workers: 8, Names: 4}
	ws, slots, slotOf, err := openWorkers(noLockInst{}, sc, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(slots) != 4 {
		t.Fatalf("%d slots for 4 names", len(slots))
	}
	var overlaps, entries int64
	drive(t.Context(), ws, slotOf, 200*time.Millisecond, time.Millisecond)
	for _, s := range slots {
		e, o, _ := s.Counts()
		entries += e
		overlaps += o
	}
	if entries == 0 || overlaps == 0 {
		t.Fatalf("8 workers on 4 names without a lock: %d entries, %d overlaps", entries, overlaps)
	}
}

type noLockInst struct{}

func (noLockInst) Worker(int, string) (libs.Worker, error) { return noLock{}, nil }
func (noLockInst) Close() error                            { return nil }

// The harness's witness must catch a lock that does not exclude.
func TestDriveCatchesABrokenLock(t *testing.T) {
	workers := make([]libs.Worker, 8)
	for i := range workers {
		workers[i] = noLock{}
	}
	slot := measure.NewSlot()
	win := drive(t.Context(), workers, func(int) *measure.Slot { return slot }, 200*time.Millisecond, time.Millisecond)
	entries, overlaps, _ := slot.Counts()
	if overlaps == 0 {
		t.Fatalf("8 workers without a lock: %d entries and no overlap", entries)
	}
	var n int64
	for _, st := range win.stats {
		n += st.n
	}
	if n != entries {
		t.Fatalf("workers counted %d acquisitions, the slot %d entries", n, entries)
	}
}

func TestBadConfigStartsNothing(t *testing.T) {
	for name, mod := range map[string]func(*Config){
		"zero duration":     func(c *Config) { c.Duration = 0 },
		"no rounds":         func(c *Config) { c.Rounds = 0 },
		"one worker":        func(c *Config) { c.Workers = 1 },
		"even redlock":      func(c *Config) { c.RedLockNodes = 4 },
		"tiny lease":        func(c *Config) { c.HoldLease = time.Millisecond },
		"one name":          func(c *Config) { c.Names = 1 },
		"no waiter clients": func(c *Config) { c.WaiterClients = 0 },
		"zero scale holds":  func(c *Config) { c.ScaleHolds = []int{0} },
		"unknown scenario":  func(c *Config) { c.Scenarios = []string{"nope"} },
		"no library picked": func(c *Config) { c.Libs = []string{"no such library"} },
	} {
		cfg := short()
		mod(&cfg)
		rep, err := Run(t.Context(), cfg)
		if !errors.Is(err, ErrConfig) || rep != nil {
			t.Errorf("%s: Run = %v, %v; want nil, ErrConfig", name, rep, err)
		}
	}
}
