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
