package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/drill"
)

// errSoakFailed is returned (exit 1) after a soak whose history failed a
// check; its figures are printed first.
var errSoakFailed = errors.New("soak: the history failed a check (see the verdict above)")

// soakFaultsHelp lists each backend's soak faults: "redis pause, kill,
// …; etcd partition, …".
func soakFaultsHelp() string {
	var per []string
	for _, k := range backend.Kinds {
		per = append(per, k+" "+strings.Join(drill.SoakFaults[k], ", "))
	}
	return strings.Join(per, "; ")
}

// soakExit is the soak's error once its results are out: errSoakFailed
// (exit 1) when a check failed, whatever happened to the report (outErr,
// then said after it); else outErr.
func soakExit(ok bool, outErr error) error {
	switch {
	case !ok && outErr != nil:
		return fmt.Errorf("%w; %w", errSoakFailed, outErr)
	case !ok:
		return errSoakFailed
	}
	return outErr
}

func newSoakCmd() *cobra.Command {
	var f drillFlags
	var o drill.SoakOptions
	var faults, history string
	var runs, busy int
	c := &cobra.Command{
		Use:   "soak",
		Short: "Workers on shared locks while faults strike the servers; check the whole history with porcupine",
		Long: `Start the servers of one lock service on free loopback ports — one redis-server (appendonly,
appendfsync always) behind a proxy, or a 3-member etcd cluster or 3-server ZooKeeper ensemble with
every client and peer link behind a proxy — and run --workers workers, each its own client, on
--names shared locks for --duration. Every --every one fault strikes, in turn, for --down:

  redis:            pause (SIGSTOP the server), kill (SIGKILL, restart), cut-clients (black-hole
                    the clients' link), latency (every reply delayed past the session)
  etcd, zookeeper:  partition (the leader cut off from its peers while its clients reach it),
                    kill, pause, cut-clients (the leader's clients cut off)

Every hold does a plain read-then-write of a counter and a fenced write to a SQLite store no fault
touches; a hold granted in the 500 ms before a fault lasts through it. Every acquire, loss signal, release and fenced write is recorded on one monotonic clock,
and at the end the whole history is checked: porcupine's mutex model (no two holds of a name
overlap) and fenced-register model per name, fencing tokens growing with grants, an independent
witness of who was inside, and the plain counters' lost updates. The verdict, the figures of every
fault and of each kind are printed; --report writes the timeline, --history every event of the
run (one JSON object a line, for a checker of your own: docs/DRILLS.md). The command exits 1 when a
check fails. Needs redis-server, etcd or ZooKeeper installed (scripts/install.sh).

--runs N runs the soak N times, one after another, each on servers of its own (each run starting the
cycle of faults one fault later than the run before), and prints a line per run and the counts of all
of them (a failed run's whole verdict too; with --history, its history to
FILE.runN); --busy K keeps K busy processes spinning beside the runs, so that the CPU is saturated,
as a loaded machine's would be. --fast-election runs etcd with a 50 ms heartbeat and a 500 ms
election timeout, so that sessions outlive a new leader's election.`,
		Example: "  dlock drill soak\n  dlock drill soak --backend etcd --duration 5m --report soak-etcd.html\n" +
			"  dlock drill soak --backend zookeeper --faults partition,kill --every 8s --down 3s --json\n" +
			"  dlock drill soak --backend etcd --fast-election --faults pause --duration 40s --runs 30 --busy 2",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.Backend = f.backend
			o.History = history != ""
			if _, ok := drill.SoakFaults[o.Backend]; !ok {
				return usagef("--backend %q: want one of %s", o.Backend, strings.Join(backend.Kinds, ", "))
			}
			if faults != "" {
				o.Faults = strings.Split(faults, ",")
			}
			if o.Backend == backend.Redis {
				if err := needRedisServer(); err != nil {
					return err
				}
			}
			if err := drill.CheckSoakOptions(o); err != nil {
				return usageError{err}
			}
			if runs > 1 || busy > 0 {
				return soakSeries(c, &f, o, runs, busy, history)
			}
			bar := newProgress(c.ErrOrStderr(), !f.json)
			o.Progress = bar.update
			res, err := drill.Soak(c.Context(), o)
			bar.finish()
			if err != nil {
				return err
			}
			out := f.output(c, res) // the results, then the report, then the history
			if history != "" {
				out = errors.Join(out, f.writeFile(c, "history", history, res.WriteHistory))
			}
			return soakExit(res.OK(), out)
		},
	}
	f.registerOutput(c)
	fl := c.Flags()
	d := drill.SoakDefaults()
	f.registerBackend(c)
	fl.DurationVar(&o.Duration, "duration", d.Duration, "how long the workers run")
	fl.IntVar(&o.Workers, "workers", d.Workers, "workers, each its own client and session")
	fl.IntVar(&o.Names, "names", d.Names, "lock names the workers share")
	fl.StringVar(&o.Shape, "shape", d.Shape, "lock shape: lock (reentrant) or mutex")
	fl.DurationVar(&o.Work, "work", d.Work, "mean time inside the lock")
	fl.DurationVar(&o.Session, "session", d.Session, "every client's session: watchdog timeout, lease TTL, session timeout")
	fl.StringVar(&faults, "faults", "", "faults to cycle through, comma-separated (default: every fault of the backend: "+soakFaultsHelp()+")")
	fl.DurationVar(&o.Every, "every", d.Every, "a fault starts every this long")
	fl.DurationVar(&o.Down, "down", d.Down, "how long each fault lasts (longer than --session: holders lose their locks)")
	fl.Uint64Var(&o.Seed, "seed", 1, "seeds the workers' choice of names")
	allowZero(c, "seed", "a seed like any other")
	fl.StringVar(&history, "history", "", "also write every event of the run to this file, one JSON object a line (checked before the run)")
	outputFlag(c, "history")
	fl.IntVar(&runs, "runs", 1, "run the soak this many times, one after another, and print the counts")
	fl.IntVar(&busy, "busy", 0, "busy processes spinning beside the runs (the CPU saturated)")
	allowZero(c, "busy", "none")
	fl.BoolVar(&o.FastElection, "fast-election", false, "etcd: a 50 ms heartbeat and a 500 ms election timeout (etcd's: 100 ms and 1 s)")
	return c
}

// soakSeries runs the soak runs times beside busy busy processes and
// prints a line per run, the whole verdict of a run that failed (and its
// history, with --history, to FILE.runN), and the counts of all of them.
func soakSeries(c *cobra.Command, f *drillFlags, o drill.SoakOptions, runs, busy int, history string) error {
	if f.report != "" {
		return usagef("--report draws one run: give it without --runs and --busy")
	}
	series, err := drill.NewSoakSeries(o, busy)
	if err != nil {
		return usageError{err}
	}
	stop, err := startBusy(c.Context(), busy)
	if err != nil {
		return err
	}
	defer stop()
	out := c.OutOrStdout()
	var outErr error
	faults := series.Faults
	for i := 1; i <= runs; i++ {
		// Each run starts the cycle one fault later, so that a short run
		// that meets only some faults leaves none out of the series.
		k := (i - 1) % len(faults)
		o.Faults = append(slices.Clone(faults[k:]), faults[:k]...)
		bar := newProgress(c.ErrOrStderr(), !f.json)
		o.Progress = bar.update
		res, err := drill.Soak(c.Context(), o)
		bar.finish()
		if err != nil {
			return fmt.Errorf("run %d of %d: %w", i, runs, err)
		}
		run := series.Add(res)
		if !f.json {
			fmt.Fprintln(out, run.Line(runs))
		}
		if !run.OK {
			if !f.json {
				outErr = errors.Join(outErr, res.Summary().WriteText(out))
			}
			if history != "" {
				outErr = errors.Join(outErr, f.writeFile(c, "history", fmt.Sprintf("%s.run%d", history, i), res.WriteHistory))
			}
		}
	}
	if f.json {
		e := json.NewEncoder(out)
		e.SetIndent("", "  ")
		outErr = errors.Join(outErr, e.Encode(series))
	} else {
		fmt.Fprintln(out)
		outErr = errors.Join(outErr, series.WriteText(out))
	}
	return soakExit(series.OK(), outErr)
}

// startBusy starts n processes that spin until stop kills them (by the
// pids of the processes it started).
func startBusy(ctx context.Context, n int) (stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	for range n {
		cmd := spawnSelf("drill", "busy")(context.WithoutCancel(ctx), nil)
		if err := cmd.Start(); err != nil {
			stop()
			return nil, fmt.Errorf("start a busy process: %w", err)
		}
		cmds = append(cmds, cmd)
	}
	return stop, nil
}

// newBusyCmd is the busy process of soak --busy: it spins one CPU until
// it is killed.
func newBusyCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "busy",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			runtime.GOMAXPROCS(1)
			for n := uint64(0); ; n++ {
				if n == 0 {
					runtime.Gosched()
				}
			}
		},
	}
}
