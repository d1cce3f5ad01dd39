// Package suite runs the side-by-side benchmark: it starts the servers,
// runs every scenario for every library over several rounds in alternating
// order, and aggregates the runs into one table per scenario.
package suite

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("invalid benchmark configuration")

// Config is one benchmark run.
type Config struct {
	Duration time.Duration // measured window of one run
	Warmup   time.Duration // unmeasured run before each measured one
	Rounds   int           // runs per row, alternating the order of libraries
	Workers  int           // workers on the hot key
	Work     time.Duration // the critical section of the "1 ms of work" scenarios
	Wait     time.Duration // wait budget of one acquisition, for every library

	Holds     int           // long holds
	HoldFor   time.Duration // how long the long holds are held
	HoldLease time.Duration // lease of the long holds, renewed every HoldLease/3
	// ScaleHolds are the larger hold counts of the holds-N scenarios (dlock
	// alone at 100 000 and more: the peers' goroutine per lock would not fit).
	ScaleHolds []int
	// ScaleHoldFor and ScaleHoldLease replace HoldFor and HoldLease in the
	// holds-N scenarios when not zero (a shorter run on a small machine).
	ScaleHoldFor, ScaleHoldLease time.Duration

	Names         int // names of the many-names scenario
	Waiters       int // waiters of the waiters scenario, on one name
	WaiterClients int // clients the waiters share

	RedLockNodes   int
	RedLockWorkers int

	Scenarios []string // scenario ids to run; empty: all
	Libs      []string // substrings of "lib variant" to run (case-insensitive); empty: all

	Progress io.Writer `json:"-"` // one line per run; nil: none
}

// Defaults returns the configuration of the README's run.
func Defaults() Config {
	return Config{
		Duration: 5 * time.Second, Warmup: 500 * time.Millisecond, Rounds: 3,
		Workers: 64, Work: time.Millisecond, Wait: 5 * time.Second,
		Holds: 1000, HoldFor: 30 * time.Second, HoldLease: 30 * time.Second,
		ScaleHolds: []int{10000, 100000},
		Names:      10000, Waiters: 1000, WaiterClients: 64,
		RedLockNodes: 5, RedLockWorkers: 16,
	}
}

func (c Config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...))
		}
	}
	check(c.Duration > 0, "duration %v (want > 0)", c.Duration)
	check(c.Warmup >= 0, "warmup %v (want >= 0)", c.Warmup)
	check(c.Rounds >= 1, "rounds %d (want >= 1)", c.Rounds)
	check(c.Workers >= 2, "workers %d (want >= 2: a hot key needs contention)", c.Workers)
	check(c.Work > 0, "work %v (want > 0)", c.Work)
	check(c.Wait > 0, "wait %v (want > 0)", c.Wait)
	check(c.Holds >= 1, "holds %d (want >= 1)", c.Holds)
	check(c.HoldFor > 0, "hold-for %v (want > 0)", c.HoldFor)
	check(c.HoldLease >= 30*time.Millisecond, "hold-lease %v (want >= 30ms)", c.HoldLease)
	for _, n := range c.ScaleHolds {
		check(n >= 1, "scale holds %d (want >= 1)", n)
	}
	check(c.ScaleHoldFor >= 0 && c.ScaleHoldLease >= 0, "scale hold-for %v, hold-lease %v (want >= 0)", c.ScaleHoldFor, c.ScaleHoldLease)
	check(c.ScaleHoldLease == 0 || c.ScaleHoldLease >= 30*time.Millisecond, "scale hold-lease %v (want >= 30ms)", c.ScaleHoldLease)
	check(c.Names >= 2, "names %d (want >= 2)", c.Names)
	check(c.Waiters >= 2 && c.WaiterClients >= 1, "waiters %d on %d clients (want >= 2 on >= 1)", c.Waiters, c.WaiterClients)
	check(c.RedLockNodes >= 3 && c.RedLockNodes%2 == 1, "redlock nodes %d (want an odd number >= 3)", c.RedLockNodes)
	check(c.RedLockWorkers >= 1, "redlock workers %d (want >= 1)", c.RedLockWorkers)
	known := map[string]bool{}
	for _, s := range scenarios(c) {
		known[s.ID] = true
	}
	for _, id := range c.Scenarios {
		check(known[id], "unknown scenario %q (known: %s)", id, strings.Join(ScenarioIDs(), ", "))
	}
	return errors.Join(errs...)
}

func (c Config) wantScenario(id string) bool {
	if len(c.Scenarios) == 0 {
		return true
	}
	for _, s := range c.Scenarios {
		if s == id {
			return true
		}
	}
	return false
}

func (c Config) wantLib(label string) bool {
	if len(c.Libs) == 0 {
		return true
	}
	label = strings.ToLower(label)
	for _, l := range c.Libs {
		if strings.Contains(label, strings.ToLower(l)) {
			return true
		}
	}
	return false
}
