package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/drill"
)

func newLeaderCmd() *cobra.Command {
	var f drillFlags
	var o drill.LeaderOptions
	c := &cobra.Command{
		Use:   "leader",
		Short: "Replicas elect a leader (package election); kill it, measure the gap until the next one, check no two led at once",
		Long: `Start --replicas processes (this binary again), each campaigning for one name with election.Lead
on a client of its own, and SIGKILL the current leader --kills times, starting a replacement each
time. For each kill it measures the gap until the next leader's term begins (the replicas report
their terms with this machine's clock), next to the session that bounds it: the dead leader's lock
lives until its session runs out (the watchdog timeout on Redis, the session lease's TTL on etcd,
the session timeout on ZooKeeper). Over every term it checks that no two overlapped (a killed
leader's term ends when its process is reaped) and that the fencing tokens strictly increase, and
prints what election.Observe saw (who led, from the holder metadata).`,
		Example: "  dlock drill leader\n  dlock drill leader --backend etcd --kills 5\n" +
			"  dlock drill leader --backend zookeeper --session 1s --json",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch {
			case o.Replicas < 2: // 0 and below are the flag layer's (checkFlags)
				return usagef("--replicas must be >= 2")
			case f.backend == backend.Etcd && o.Session < time.Second:
				return usagef("--session %v: etcd counts lease TTLs in whole seconds, at least 1s (see etcdlock.Config.TTL)", o.Session)
			}
			return f.with(c, f.backend, func(ctx context.Context, b *backend.Backend) (result, error) {
				bar := newProgress(c.ErrOrStderr(), !f.json)
				o.Progress = bar.update
				o.Spawn = spawnSelf("drill", "leader-replica")
				res, err := drill.Leader(ctx, b, o)
				bar.finish()
				return res, err
			})
		},
	}
	f.registerAll(c)
	d := drill.LeaderDefaults()
	c.Flags().IntVar(&o.Replicas, "replicas", d.Replicas, "candidate processes campaigning at once")
	c.Flags().IntVar(&o.Kills, "kills", d.Kills, "leaders killed, one after another")
	c.Flags().DurationVar(&o.Session, "session", d.Session, "every replica's session: watchdog timeout (redis), lease TTL (etcd, >= 1s), session timeout (zookeeper)")
	return c
}

// newLeaderReplicaCmd is a child process of the leader drill.
func newLeaderReplicaCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "leader-replica BACKEND ADDR NAME LABEL SESSION",
		Hidden: true,
		Args: func(c *cobra.Command, args []string) error {
			if err := cobra.ExactArgs(5)(c, args); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			a, err := drill.ParseLeaderReplicaArgs(args)
			if err != nil {
				return usageError{err}
			}
			return drill.LeaderReplica(c.Context(), a, c.InOrStdin(), c.OutOrStdout())
		},
	}
}
