package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/drill"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/spf13/cobra"
)

// maxReplicas bounds seckill's --replicas: each replica holds its own
// Redis, lock and database clients.
const maxReplicas = 1000

func newSeckillCmd() *cobra.Command {
	var f drillFlags
	var o drill.SeckillOptions
	var db, sku string
	var targets []string
	c := &cobra.Command{
		Use:   "seckill",
		Short: "Run the flash sale: buyers race for a few units through every strategy, measured",
		Long: `Run the flash sale of the articles (002 §4.5): --buyers buyers for --stock units, at most
--concurrency of them in flight at once (a buyer is one request: a worker takes the next buyer
when its request ends), through --replicas simulated service replicas (each with its own Redis
client, lock client and database pool: no in-process lock can help), once per strategy. Prints
one row per strategy: sold, oversold, final stock, lock keys left behind, buy requests handled
per second, latency percentiles, sold-out and busy answers, stale writes the fence rejected,
and a verdict: clean, UNSOLD (units left while buyers were turned away; the line below the
table says why) or PROBLEMS (the books do not reconcile). Runs longer than 2 s show their
progress on stderr.

With no --redis it starts redis-server from PATH on a free port (or an in-process miniredis);
with no --db it uses SQLite in a temp dir. In a database or Redis you give, each strategy's sku,
orders, idempotency rows and Redis keys are removed once measured (--keep leaves them and says
where). With --target it drives running 'dlock serve' processes over HTTP instead (start them
with --stock SKU=QTY and pass --sku). With --backend etcd or zookeeper the lock and fenced
strategies take their locks there (--etcd, --zk, or an embedded server); Redis still holds
prededuct's stock.`,
		Example: "  dlock seckill\n" +
			"  dlock seckill --buyers 5000 --stock 1000 --strategy conditional --strategy lock\n" +
			"  dlock seckill --backend etcd --strategy lock --strategy fenced\n" +
			"  dlock seckill --redis redis://127.0.0.1:6379/0 --db postgres://postgres@127.0.0.1:5432/test --json\n" +
			"  dlock seckill --target http://127.0.0.1:8081 --target http://127.0.0.1:8082 --sku 1001",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			// Every flag is checked before any server starts (checkFlags
			// refused zeros and negatives already).
			if o.Replicas > maxReplicas {
				return usagef("--replicas %d: want at most %d", o.Replicas, maxReplicas)
			}
			for _, s := range o.Strategies {
				if !slices.Contains(inventory.Names, s) {
					return usagef("--strategy %q: want one of %s", s, strings.Join(inventory.Names, ", "))
				}
			}
			if !slices.Contains(backend.Kinds, f.backend) {
				return usagef("--backend %q: want one of %s", f.backend, strings.Join(backend.Kinds, ", "))
			}
			if err := f.checkAddrs(); err != nil {
				return err
			}
			bar := newProgress(c.ErrOrStderr(), !f.json)
			defer bar.finish()
			var res *drill.SeckillResult
			var names []string
			var signals []lockSignals
			if len(targets) > 0 {
				fmt.Fprintf(f.infoOut(c), "targets: %s\n", strings.Join(targets, ", "))
				var err error
				if res, err = drill.SeckillHTTP(c.Context(), targets, sku, o.Buyers, o.Concurrency, o.Seed, bar.update); err != nil {
					return err // a target that does not answer: exit 1
				}
			} else {
				if db != "" {
					st, err := inventory.Open(c.Context(), db)
					if err != nil {
						return dbError(err)
					}
					st.Close()
				}
				r, err := f.open(c, backend.Redis)
				if err != nil {
					return err
				}
				defer r.Close()
				if f.backend != backend.Redis { // the lock strategies' locks elsewhere
					b, err := f.openBackend(c)
					if err != nil {
						return err
					}
					defer b.Close()
					o.Locks = b
				}
				o.DSN, o.Progress = db, bar.update
				fmt.Fprintf(f.infoOut(c), "database: %s\n", dbKind(db))
				if res, names, signals, err = seckillWithSignals(c, r, o); err != nil {
					return err
				}
			}
			bar.finish()
			if f.json {
				e := json.NewEncoder(c.OutOrStdout())
				for i, row := range res.Rows {
					out := struct {
						drill.SeckillRow
						Signals *lockSignals `json:"lock_signals,omitempty"`
					}{SeckillRow: row}
					if i < len(signals) {
						out.Signals = &signals[i]
					}
					if err := e.Encode(out); err != nil {
						return err
					}
				}
				if res.Leftovers != "" {
					fmt.Fprintln(c.ErrOrStderr(), res.Leftovers)
				}
				return nil
			}
			sum := res.Summary()
			if len(signals) > 0 {
				sum.Tables = append(sum.Tables, signalTable(names, signals))
			}
			fmt.Fprintln(c.OutOrStdout())
			return sum.WriteText(c.OutOrStdout())
		},
	}
	// The lock services and --json: seckill writes no HTML report.
	f.registerRedis(c)
	f.registerJSON(c)
	f.registerServices(c)
	c.Flags().IntVar(&o.Buyers, "buyers", 500, "buyers, one unit each")
	c.Flags().IntVar(&o.Concurrency, "concurrency", drill.DefaultSeckillConcurrency, "buyers in flight at once")
	c.Flags().BoolVar(&o.Keep, "keep", false, "leave the run's skus, orders and Redis keys in the --db and --redis you gave (default: removed)")
	c.Flags().IntVar(&o.Stock, "stock", 10, "units on sale")
	c.Flags().IntVar(&o.Replicas, "replicas", 3, fmt.Sprintf("simulated service replicas (at most %d)", maxReplicas))
	c.Flags().StringArrayVar(&o.Strategies, "strategy", nil, "strategy to run (repeatable; default all: "+strings.Join(inventory.Names, ", ")+")")
	c.Flags().StringVar(&db, "db", "", "database: postgres://… or sqlite:PATH (default SQLite in a temp dir)")
	c.Flags().StringArrayVar(&targets, "target", nil, "URL of a running 'dlock serve' (repeatable): drive it over HTTP")
	c.Flags().StringVar(&sku, "sku", "1001", "with --target: the sku on sale")
	c.Flags().Uint64Var(&o.Seed, "seed", 1, "seeds which replica serves which buyer")
	allowZero(c, "seed", "a seed like any other")
	allowZero(c, "stock", "nothing on sale: every buyer is turned away")
	return c
}

// seckillWithSignals runs the sale one strategy at a time, each with its
// own Prometheus observer, and reads the lock signals back.
func seckillWithSignals(c *cobra.Command, r *backend.Backend, o drill.SeckillOptions) (*drill.SeckillResult, []string, []lockSignals, error) {
	names := o.Strategies
	if len(names) == 0 {
		names = inventory.Names
	}
	var all *drill.SeckillResult
	var sig []lockSignals
	for _, n := range names {
		obs, reg, err := newSignalRegistry()
		if err != nil {
			return nil, nil, nil, err
		}
		one := o
		one.Strategies, one.Observer = []string{n}, obs
		res, err := drill.Seckill(c.Context(), r, one)
		if err != nil {
			return nil, nil, nil, err
		}
		s, err := readSignals(reg)
		if err != nil {
			return nil, nil, nil, err
		}
		if all == nil {
			all = res
		} else {
			all.Rows = append(all.Rows, res.Rows...)
		}
		sig = append(sig, s)
	}
	return all, names, sig, nil
}

// dbError marks a database that cannot be opened: a DSN that cannot be
// read is bad input (exit 2); a database that does not answer, a runtime
// failure (exit 1).
func dbError(err error) error {
	err = fmt.Errorf("--db: %w", err)
	if errors.Is(err, inventory.ErrInvalidInput) {
		return usageError{err}
	}
	return err
}

func dbKind(dsn string) string {
	if dsn == "" {
		return "sqlite (temp dir, removed at exit)"
	}
	if strings.HasPrefix(dsn, "postgres") {
		return "postgresql"
	}
	return "sqlite " + dsn
}
