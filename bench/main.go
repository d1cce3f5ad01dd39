// Command bench runs dlock side by side with its Go peers (redsync,
// bsm/redislock, rueidislock, etcd's concurrency.Mutex) against redis-server
// processes and an embedded etcd it starts itself on 127.0.0.1, and prints
// one Markdown table per scenario (or JSON with --json).
//
//	cd bench && go run . [--duration 5s] [--rounds 3] [--workers 64] [--json]
//	cd bench && go run . --render report.json   # tables of a saved report
//
// Exit codes: 0 done, 1 the benchmark failed, 2 bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/dlockgo/dlock/bench/internal/servers"
	"github.com/dlockgo/dlock/bench/internal/suite"
)

func main() {
	if servers.ServeEtcdChild() {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args, runs the benchmark and writes the tables (or JSON) to
// stdout and progress to stderr; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := suite.Defaults()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured window of each run")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "unmeasured warm-up before each run")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds (each runs every library once, alternating the order)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "workers on the hot key (and clients, in the per-worker-client scenarios)")
	fs.DurationVar(&cfg.Work, "work", cfg.Work, "critical section of the work-* scenarios")
	fs.DurationVar(&cfg.Wait, "wait", cfg.Wait, "wait budget of one acquisition, for every library")
	fs.IntVar(&cfg.Holds, "holds", cfg.Holds, "locks held at once in the holds scenario")
	fs.DurationVar(&cfg.HoldFor, "hold-for", cfg.HoldFor, "how long the holds scenario holds them")
	fs.DurationVar(&cfg.HoldLease, "hold-lease", cfg.HoldLease, "lease of the holds, renewed every lease/3")
	scaleHolds := fs.String("scale-holds", "10000,100000", "comma-separated hold counts of the holds-N scenarios (peers up to 10000)")
	fs.DurationVar(&cfg.ScaleHoldFor, "scale-hold-for", 0, "hold-for of the holds-N scenarios (default: --hold-for)")
	fs.DurationVar(&cfg.ScaleHoldLease, "scale-hold-lease", 0, "hold-lease of the holds-N scenarios (default: --hold-lease)")
	fs.IntVar(&cfg.Names, "names", cfg.Names, "names of the many-names scenario")
	fs.IntVar(&cfg.Waiters, "waiters", cfg.Waiters, "workers on one name in the waiters scenario")
	fs.IntVar(&cfg.WaiterClients, "waiter-clients", cfg.WaiterClients, "clients the waiters share")
	fs.IntVar(&cfg.RedLockNodes, "redlock-nodes", cfg.RedLockNodes, "redis-server processes of the RedLock scenario")
	fs.IntVar(&cfg.RedLockWorkers, "redlock-workers", cfg.RedLockWorkers, "workers of the RedLock scenario")
	scen := fs.String("scenarios", "", "comma-separated scenarios to run (default all: "+strings.Join(suite.ScenarioIDs(), ",")+")")
	lib := fs.String("libs", "", `comma-separated substrings of "library variant" to run (default all)`)
	asJSON := fs.Bool("json", false, "print the report as JSON (every run, medians, command mix) instead of tables")
	jsonFile := fs.String("json-file", "", "also write the JSON report to this file")
	render := fs.String("render", "", "run nothing: print the tables of a JSON report written by --json or --json-file")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg.ScaleHolds = nil
	for _, f := range strings.Split(*scaleHolds, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			fmt.Fprintf(stderr, "bench: --scale-holds: %v\n", err)
			return 2
		}
		cfg.ScaleHolds = append(cfg.ScaleHolds, n)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "bench: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if *render != "" {
		return renderReport(*render, stdout, stderr)
	}
	cfg.Scenarios = split(*scen)
	cfg.Libs = split(*lib)
	if !*quiet {
		cfg.Progress = stderr
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := suite.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		if errors.Is(err, suite.ErrConfig) {
			return 2
		}
		return 1
	}
	if *jsonFile != "" {
		f, err := os.Create(*jsonFile)
		if err == nil {
			err = errors.Join(writeJSON(f, rep), f.Close())
		}
		if err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
	}
	if *asJSON {
		if err := writeJSON(stdout, rep); err != nil {
			fmt.Fprintln(stderr, "bench:", err)
			return 1
		}
		return 0
	}
	rep.WriteMarkdown(stdout)
	return 0
}

// renderReport prints the tables of a saved JSON report, with the medians
// recomputed from its runs.
func renderReport(path string, stdout, stderr io.Writer) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 2
	}
	var rep suite.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		fmt.Fprintf(stderr, "bench: %s: %v\n", path, err)
		return 2
	}
	rep.Resummarise()
	rep.WriteMarkdown(stdout)
	return 0
}

func writeJSON(w io.Writer, rep *suite.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
