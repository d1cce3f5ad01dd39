package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/drill"
	"github.com/spf13/cobra"
)

// drillFlags are the flags every drill takes.
type drillFlags struct {
	serviceFlags // --backend and the addresses: registerAll, registerServices
	json         bool
	report       string
}

func (f *drillFlags) register(c *cobra.Command) {
	f.registerRedis(c)
	f.registerOutput(c)
}

// registerRedis registers --redis alone.
func (f *drillFlags) registerRedis(c *cobra.Command) {
	c.Flags().StringVar(&f.redis, "redis", "", "Redis URL (redis://host:port/db; with ?master_name=NAME, a Sentinel); default: an embedded server")
}

// registerOutput registers the output flags only (drills that start their
// own servers take no --redis).
func (f *drillFlags) registerOutput(c *cobra.Command) {
	f.registerJSON(c)
	c.Flags().StringVar(&f.report, "report", "", "also write a self-contained HTML report to this file (checked before the run)")
	outputFlag(c, "report")
}

// registerJSON registers --json alone (seckill writes no HTML report).
func (f *drillFlags) registerJSON(c *cobra.Command) {
	c.Flags().BoolVar(&f.json, "json", false, "print the figures as JSON")
}

// registerAll registers --backend and the addresses of every lock
// service, with the output flags.
func (f *drillFlags) registerAll(c *cobra.Command) {
	f.register(c)
	f.registerServices(c)
}

// registerServices registers --backend and the addresses of the lock
// services but Redis (--etcd, --zk) alone.
func (f *drillFlags) registerServices(c *cobra.Command) {
	f.registerBackend(c)
	f.registerAddrs(c, false)
}

// openBackend opens the lock service --backend names.
func (f *drillFlags) openBackend(c *cobra.Command) (*backend.Backend, error) {
	return f.open(c, f.backend)
}

// open opens the lock service kind at the address its flag gives, or the
// embedded default, and says which one on the first line (on stderr under
// --json): "redis: redis at 127.0.0.1:6379 (from --redis)". An address that
// cannot be read is bad input (exit 2); a server that does not answer is a
// runtime failure (exit 1).
func (f *drillFlags) open(c *cobra.Command, kind string) (*backend.Backend, error) {
	flag, addr, ok := f.addr(kind)
	if !ok {
		return nil, usagef("--backend %q: want one of %s", kind, strings.Join(backend.Kinds, ", "))
	}
	b, err := backend.Open(c.Context(), kind, addr)
	if err != nil {
		return nil, openError(flag, err)
	}
	note := ""
	if !b.Embedded {
		note = " (" + flagSource(c, flag) + ")"
	}
	fmt.Fprintf(f.infoOut(c), "%s: %s%s\n", b.Kind, b.Desc, note)
	return b, nil
}

// checkAddrs reads the addresses of the Redis and of the --backend lock
// service the flags give, without connecting: a command checks them before
// it starts anything (an embedded server), bad input (exit 2) otherwise.
func (f *drillFlags) checkAddrs() error {
	if err := backend.CheckAddr(backend.Redis, f.redis); err != nil {
		return openError("redis", err)
	}
	if flag, addr, ok := f.addr(f.backend); ok && f.backend != backend.Redis {
		return openError(flag, backend.CheckAddr(f.backend, addr))
	}
	return nil
}

// openError marks an error of backend.Open (or backend.NewRedisClient)
// that comes from the command line as bad input, naming the flag that gave
// it: `--redis "x": invalid URL scheme (want …)`. Any other (a server that
// does not answer, one that could not be started) is a runtime failure.
func openError(flag string, err error) error {
	if err == nil {
		return nil
	}
	var ae *backend.AddrError
	switch {
	case errors.As(err, &ae) && errors.Is(err, backend.ErrBadAddress):
		return usagef("--%s %q: %s", flag, ae.Addr, ae.Reason)
	case errors.Is(err, backend.ErrUnknown):
		return usageError{err}
	}
	return err
}

// with opens the lock service kind, runs fn on it and prints the result.
func (f *drillFlags) with(c *cobra.Command, kind string, fn func(ctx context.Context, b *backend.Backend) (result, error)) error {
	b, err := f.open(c, kind)
	if err != nil {
		return err
	}
	defer b.Close()
	res, err := fn(c.Context(), b)
	if err != nil {
		return err
	}
	return f.output(c, res)
}

// infoOut is where lines for people go: stdout, or stderr under --json.
func (f *drillFlags) infoOut(c *cobra.Command) io.Writer {
	if f.json {
		return c.ErrOrStderr()
	}
	return c.OutOrStdout()
}

// result is a drill's result: its figures (the JSON) and its Summary (the
// text and the HTML report).
type result interface {
	Summary() *drill.Summary
}

// output prints res as JSON or for people, then writes the HTML report
// (its path was checked before the run: checkFlags), so that a report that
// cannot be written loses nothing of what the run printed. Its error is a
// runtime failure (exit 1).
func (f *drillFlags) output(c *cobra.Command, res result) error {
	sum := res.Summary()
	if f.json {
		e := json.NewEncoder(c.OutOrStdout())
		e.SetIndent("", "  ")
		if err := e.Encode(res); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(c.OutOrStdout())
		if err := sum.WriteText(c.OutOrStdout()); err != nil {
			return err
		}
	}
	if f.report == "" {
		return nil
	}
	return f.writeFile(c, "report", f.report, sum.WriteHTML)
}

// writeFile writes a file of the run (what: "report", "history") to path,
// whose path was checked before the run, and says so: "report: PATH".
func (f *drillFlags) writeFile(c *cobra.Command, what, path string, write func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err == nil {
		err = write(fh)
		err = errors.Join(err, fh.Close())
	}
	if err != nil {
		return fmt.Errorf("write %s %q: %w", what, path, unwrapPath(err))
	}
	fmt.Fprintf(f.infoOut(c), "%s: %s\n", what, path)
	return nil
}

func newDrillCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "drill",
		Short: "Run the failure drills of the articles and print what was measured",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return usagef("drill: name a drill (see dlock drill --help)")
		},
	}
	cmd.AddCommand(newMisdeleteCmd(), newLeaseCmd(), newContentionCmd(), newPauseCmd(), newPauseHolderCmd(), newFailoverCmd(), newRedLockCmd(),
		newLeaderCmd(), newLeaderReplicaCmd(), newSoakCmd(), newBusyCmd())
	return cmd
}

func newMisdeleteCmd() *cobra.Command {
	var f drillFlags
	var lease time.Duration
	c := &cobra.Command{
		Use:     "misdelete",
		Short:   "A stalled holder deletes someone else's lock with GET-then-DEL; the Lua release does not (000 §3.1)",
		Example: "  dlock drill misdelete\n  dlock drill misdelete --lease 1s --json",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return f.with(c, backend.Redis, func(ctx context.Context, r *backend.Backend) (result, error) {
				return drill.Misdelete(ctx, r, lease)
			})
		},
	}
	f.register(c)
	c.Flags().DurationVar(&lease, "lease", 200*time.Millisecond, "A's lease")
	return c
}

func newLeaseCmd() *cobra.Command {
	var f drillFlags
	var lease, work time.Duration
	var scale float64
	c := &cobra.Command{
		Use:   "lease",
		Short: "A lease shorter than the work: when the second holder gets in; then the watchdog (000 §3.5)",
		Example: "  dlock drill lease                 # 5s lease vs 8s work, scaled by 0.1\n" +
			"  dlock drill lease --scale 1       # the article's real 5s vs 8s\n" +
			"  dlock drill lease --scale 1 --backend zookeeper",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return f.with(c, f.backend, func(ctx context.Context, b *backend.Backend) (result, error) {
				return drill.Lease(ctx, b, scaled(lease, scale), scaled(work, scale))
			})
		},
	}
	f.registerAll(c)
	c.Flags().DurationVar(&lease, "lease", 5*time.Second, "fixed lease (and watchdog timeout), before --scale")
	c.Flags().DurationVar(&work, "work", 8*time.Second, "work inside the lock, before --scale")
	c.Flags().Float64Var(&scale, "scale", 0.1, "multiply every duration by this")
	return c
}

func newContentionCmd() *cobra.Command {
	var f drillFlags
	var workers, loops int
	var work time.Duration
	c := &cobra.Command{
		Use:   "contention",
		Short: "Workers looping on one lock: the wait-time distribution (000 §3.5)",
		Example: "  dlock drill contention\n  dlock drill contention --workers 8 --loops 500 --work 1ms --json\n" +
			"  dlock drill contention --backend etcd --workers 64 --loops 20 --work 0s",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return f.with(c, f.backend, func(ctx context.Context, b *backend.Backend) (result, error) {
				return drill.Contention(ctx, b, workers, loops, work)
			})
		},
	}
	f.registerAll(c)
	c.Flags().IntVar(&workers, "workers", 2, "workers, each with its own client")
	c.Flags().IntVar(&loops, "loops", 100, "acquisitions per worker")
	c.Flags().DurationVar(&work, "work", 2*time.Millisecond, "time spent inside the lock")
	allowZero(c, "work", "acquire and release at once")
	return c
}

// unwrapPath drops the *os.PathError around err (its path is named already).
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func scaled(d time.Duration, s float64) time.Duration { return time.Duration(float64(d) * s) }

func newPauseCmd() *cobra.Command {
	var f drillFlags
	var lease time.Duration
	c := &cobra.Command{
		Use:     "pause",
		Short:   "A holder frozen (SIGSTOP) past its lease writes after another took the lock: fencing rejects it (002 §4.1)",
		Example: "  dlock drill pause\n  dlock drill pause --lease 1s --json\n  dlock drill pause --backend etcd --lease 1s",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return f.with(c, f.backend, func(ctx context.Context, b *backend.Backend) (result, error) {
				// The storage both holders write to is a Redis: the lock
				// service's own when it is one, else --redis or an embedded one.
				r := b
				if b.Kind != backend.Redis {
					var err error
					if r, err = f.open(c, backend.Redis); err != nil {
						return nil, err
					}
					defer r.Close()
				}
				return drill.Pause(ctx, r, drill.PauseOptions{Lease: lease, Locks: b, Spawn: spawnSelf("drill", "pause-holder")})
			})
		},
	}
	f.registerAll(c)
	c.Flags().DurationVar(&lease, "lease", 300*time.Millisecond, "the frozen holder's lease")
	return c
}

// newPauseHolderCmd is the child process of the pause drill.
func newPauseHolderCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "pause-holder BACKEND ADDR REDIS-URL NAME KEY LEASE",
		Hidden: true,
		Args:   cobra.ExactArgs(6),
		RunE: func(c *cobra.Command, args []string) error {
			a, err := drill.ParsePauseHolderArgs(args)
			if err != nil {
				return usageError{err}
			}
			return drill.PauseHolder(c.Context(), a, c.InOrStdin(), c.OutOrStdout())
		},
	}
}

// spawnSelf returns a Spawn function that runs this same executable with
// the given leading arguments.
func spawnSelf(lead ...string) func(ctx context.Context, args []string) *exec.Cmd {
	return func(ctx context.Context, args []string) *exec.Cmd {
		self, err := os.Executable()
		if err != nil {
			self = os.Args[0]
		}
		cmd := exec.CommandContext(ctx, self, append(append([]string(nil), lead...), args...)...)
		cmd.Env = append(os.Environ(), runMainEnv+"=1")
		cmd.Stderr = os.Stderr
		return cmd
	}
}

// runMainEnv makes a test binary behave as the dlock command (see TestMain),
// so drills can re-execute themselves under go test.
const runMainEnv = "DLOCK_RUN_MAIN"

func newFailoverCmd() *cobra.Command {
	var f drillFlags
	var o drill.FailoverOptions
	var co drill.ConsensusFailoverOptions
	rd, cd := drill.FailoverDefaults(), drill.ConsensusFailoverDefaults()
	c := &cobra.Command{
		Use:   "failover",
		Short: "Kill, freeze or partition the Redis master or the etcd/ZooKeeper leader mid-sale; count double grants and oversold units",
		Long: `Start a master with replicas and three Sentinels (redis-server --sentinel), run a sale over many
skus with per-sku locks through Sentinel clients (each worker its own client), and inject a fault:

  --fault crash         SIGKILL the master; Sentinel promotes a replica; the sale goes on.
  --fault partition     cut the old master off from its replicas, the Sentinels and the clients on
                        their side (links through an embedded toxiproxy, black-holed) while the other
                        clients still reach it; Sentinel promotes a replica; two masters take lock
                        writes until the partition heals.

Each run is repeated for three modes: plain lock, lock + ReplicaAck(1, 100ms), lock + fenced writes.
An independent witness (holders record entering and leaving their sku on one monotonic clock) counts
double grants. Needs redis-server on PATH.

With --backend etcd or zookeeper the drill starts a 3-member etcd cluster or a 3-server ZooKeeper
ensemble per run, workers (each its own client and session) sell under per-sku locks, and the
leader is faulted for --down, then brought back:

  --fault kill          SIGKILL the leader; restart it (crash means kill).
  --fault pause         SIGSTOP the leader; SIGCONT it.
  --fault partition     cut the leader off from its peers (the links between members are proxied)
                        while every client still reaches it: the majority elects a leader of its
                        own; heal.
  --fault cut-clients   black-hole the clients' connections to the leader (its peers still reach
                        it, so it stays leader); heal.

Every holder writes to a plain ledger (read-check-write) and to a fenced one; the witness counts
double grants, and each run prints its figures. --runs, --workers, --before and --after have other
defaults on etcd and zookeeper (each flag says which).`,
		Example: "  dlock drill failover --fault crash\n  dlock drill failover --fault partition --runs 3 --json\n" +
			"  dlock drill failover --backend etcd --fault kill\n  dlock drill failover --backend zookeeper --fault cut-clients --runs 10 --json",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch f.backend {
			case backend.Redis:
				for _, name := range []string{"session", "down"} {
					if c.Flags().Changed(name) {
						return usagef("--%s is a flag of the etcd and zookeeper failover (use --lease, --partition on Redis)", name)
					}
				}
			default: // the consensus failover: a service of an ensemble
				if !slices.Contains(backend.Kinds, f.backend) {
					return usagef("--backend %q: want one of %s", f.backend, strings.Join(backend.Kinds, ", "))
				}
				return runConsensusFailover(c, &f, o, co)
			}
			if o.Fault != "crash" && o.Fault != "partition" {
				return usagef("--fault %q: want crash or partition on redis", o.Fault)
			}
			// The flags whose default differs per backend are 0 unless given.
			fl := c.Flags()
			for _, x := range []struct {
				flag string
				set  func()
			}{
				{"runs", func() { o.Runs = rd.Runs }},
				{"workers", func() { o.Workers = rd.Workers }},
				{"before", func() { o.Before = rd.Before }},
				{"after", func() { o.After = rd.After }},
			} {
				if !fl.Changed(x.flag) {
					x.set()
				}
			}
			if o.StaleShare >= 1 {
				return usagef("--stale-share %v: want a share below 1", o.StaleShare)
			}
			for _, m := range o.Modes {
				if !slices.Contains(drill.FailoverModes, m) {
					return usagef("--mode %q: want one of %s", m, strings.Join(drill.FailoverModes, ", "))
				}
			}
			if err := needRedisServer(); err != nil {
				return err
			}
			bar := newProgress(c.ErrOrStderr(), !f.json)
			o.Progress = bar.update
			res, err := drill.Failover(c.Context(), o)
			bar.finish()
			if err != nil {
				return err
			}
			return f.output(c, res)
		},
	}
	f.registerOutput(c)
	fl := c.Flags()
	// perBackend says a flag's default on each backend, when they differ
	// (the flag's own default is then 0: not given).
	perBackend := func(redis, consensus any) string {
		return fmt.Sprintf(" (default: redis %v; etcd, zookeeper %v)", redis, consensus)
	}
	fl.StringVar(&o.Fault, "fault", "crash", "the fault: on redis crash or partition; on etcd, zookeeper kill (crash means kill), pause, partition or cut-clients (see above)")
	fl.IntVar(&o.Runs, "runs", 0, "runs (per mode on redis)"+perBackend(rd.Runs, cd.Runs))
	fl.StringArrayVar(&o.Modes, "mode", nil, "redis: mode to run (repeatable; default all: "+strings.Join(drill.FailoverModes, ", ")+")")
	fl.IntVar(&o.Workers, "workers", 0, "workers, each with its own clients"+perBackend(rd.Workers, cd.Workers))
	fl.IntVar(&o.SKUs, "skus", rd.SKUs, "skus the workers spread over")
	fl.DurationVar(&o.Section, "section", rd.Section, "time inside the lock before the write")
	fl.DurationVar(&o.Lease, "lease", rd.Lease, "redis: fixed lease of every lock")
	fl.IntVar(&o.Replicas, "replicas", rd.Replicas, "redis: replicas of the master")
	fl.DurationVar(&o.ReplDelay, "repl-delay", 0, "redis: latency added to the replication link (toxiproxy; 0: none)")
	allowZero(c, "repl-delay", "none added")
	fl.DurationVar(&o.Before, "before", 0, "sale before the fault"+perBackend(rd.Before, cd.Before))
	fl.DurationVar(&o.After, "after", 0, "sale after recovery (or after the partition heals)"+perBackend(rd.After, cd.After))
	fl.DurationVar(&o.Partition, "partition", rd.Partition, "redis: how long the partition lasts after the promotion (two masters)")
	fl.Float64Var(&o.StaleShare, "stale-share", rd.StaleShare, "redis, partition: share of workers that still reach the old master (below 1)")
	fl.IntVar(&o.MinReplicasToWrite, "min-replicas-to-write", 0, "redis: set min-replicas-to-write (max lag 1s) on the master (0: unset)")
	allowZero(c, "min-replicas-to-write", "unset")
	fl.Uint64Var(&o.Seed, "seed", 1, "seeds the workers' choice of skus")
	allowZero(c, "seed", "a seed like any other")
	f.registerBackend(c)
	fl.DurationVar(&co.Session, "session", cd.Session, "etcd, zookeeper: every client's session (lease TTL, session timeout)")
	fl.DurationVar(&co.Down, "down", cd.Down, "etcd, zookeeper: how long the leader stays killed, frozen or cut off")
	return c
}

// runConsensusFailover runs the failover drill on etcd or ZooKeeper with
// the flags the user set (the rest take that drill's defaults).
func runConsensusFailover(c *cobra.Command, f *drillFlags, o drill.FailoverOptions, co drill.ConsensusFailoverOptions) error {
	co.Backend, co.Fault = f.backend, o.Fault
	if co.Fault == "crash" {
		co.Fault = drill.FaultKill
	}
	if !slices.Contains(drill.ConsensusFaults, co.Fault) {
		return usagef("--fault %q: want one of %s on %s", co.Fault, strings.Join(drill.ConsensusFaults, ", "), co.Backend)
	}
	fl := c.Flags()
	for _, name := range []string{"mode", "lease", "replicas", "repl-delay", "partition", "stale-share", "min-replicas-to-write"} {
		if fl.Changed(name) {
			return usagef("--%s is a Redis failover flag (not for --backend %s)", name, co.Backend)
		}
	}
	// 0 (not given): the drill's default.
	co.Runs, co.Workers, co.SKUs, co.Section, co.Before, co.After, co.Seed = o.Runs, o.Workers, o.SKUs, o.Section, o.Before, o.After, o.Seed
	bar := newProgress(c.ErrOrStderr(), !f.json)
	co.Progress = bar.update
	res, err := drill.FailoverConsensus(c.Context(), co)
	bar.finish()
	if err != nil {
		return err
	}
	return f.output(c, res)
}

// needRedisServer fails when redis-server is not on PATH.
func needRedisServer() error {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return fmt.Errorf("this drill starts redis-server processes and none is on PATH: install it with: apt-get install redis-server redis-sentinel")
	}
	return nil
}

func newRedLockCmd() *cobra.Command {
	var f drillFlags
	var lease time.Duration
	c := &cobra.Command{
		Use:     "redlock",
		Short:   "Five masters, one clock jump: two clients hold a RedLock at once; the fence rejects the older (000 §2.8)",
		Example: "  dlock drill redlock\n  dlock drill redlock --json",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if lease < 100*time.Millisecond {
				return usagef("--lease must be at least 100ms")
			}
			if err := needRedisServer(); err != nil {
				return err
			}
			res, err := drill.RedLock(c.Context(), lease)
			if err != nil {
				return err
			}
			return f.output(c, res)
		},
	}
	f.registerOutput(c)
	c.Flags().DurationVar(&lease, "lease", 5*time.Second, "lease of both RedLocks")
	return c
}
