package suite

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/dlockgo/dlock/bench/internal/libs"
)

// bench is one benchmark run in progress.
type bench struct {
	cfg  Config
	env  *env
	runs int // runs so far: makes every run's lock names fresh
}

// libEnv is what a library of scenario sc connects to.
func (b *bench) libEnv(sc Scenario, lease time.Duration) libs.Env {
	return libs.Env{Redis: b.env.addrs(sc.Nodes), Etcd: b.env.etcdURL(), ZooKeeper: b.env.zkAddr(), Wait: b.cfg.Wait, Lease: lease}
}

// Run runs the selected scenarios and returns their tables. For each
// scenario, every round runs every library once, in an order that alternates
// between rounds (forward, backward, ...) so that no library always runs
// first or last; a row reports the median of its runs. It starts and stops
// every server it needs.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var selected []Scenario
	nodes, etcd, zk := 0, false, false
	for _, sc := range scenarios(cfg) {
		if !cfg.wantScenario(sc.ID) {
			continue
		}
		sc.Entries = slices.DeleteFunc(slices.Clone(sc.Entries), func(e libs.Entry) bool { return !cfg.wantLib(e.Label()) })
		if len(sc.Entries) == 0 {
			continue
		}
		selected = append(selected, sc)
		nodes = max(nodes, sc.Nodes)
		etcd = etcd || sc.usesEtcd()
		zk = zk || sc.usesZooKeeper()
	}
	if len(selected) == 0 {
		return nil, fmt.Errorf("%w: no scenario and library selected", ErrConfig)
	}
	e, err := startEnv(ctx, nodes, etcd, zk)
	if err != nil {
		return nil, err
	}
	defer e.close()
	b := &bench{cfg: cfg, env: e}
	rep := &Report{Machine: e.machine(ctx), Config: cfg, Started: time.Now().UTC().Format(time.RFC3339)}
	for _, sc := range selected {
		t, err := b.scenario(ctx, sc)
		if err != nil {
			return rep, err
		}
		rep.Tables = append(rep.Tables, t)
	}
	return rep, nil
}

func (b *bench) scenario(ctx context.Context, sc Scenario) (*Table, error) {
	t := &Table{ID: sc.ID, Title: sc.Title, Note: sc.Note, Holds: sc.kind == holds, Fresh: sc.Fresh, Workers: sc.Workers, Clients: sc.Clients}
	for _, e := range sc.Entries {
		t.Rows = append(t.Rows, newRow(e))
	}
	for round := range b.cfg.Rounds {
		order := make([]int, len(sc.Entries))
		for i := range order {
			order[i] = i
		}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for pos, i := range order {
			e := sc.Entries[i]
			if err := b.env.reset(ctx, sc.Nodes); err != nil {
				return t, err
			}
			b.runs++
			var run Measurement
			var err error
			if sc.kind == holds {
				run, err = b.runHolds(ctx, sc, e, b.runs)
			} else {
				run, err = b.runContended(ctx, sc, e, lockName(sc, b.runs))
			}
			if err != nil {
				return t, fmt.Errorf("suite: %s, %s, round %d: %w", sc.ID, e.Label(), round+1, err)
			}
			run.Round, run.Order = round+1, pos+1
			t.Rows[i].Runs = append(t.Rows[i].Runs, run)
			b.progress(sc, e, run)
		}
	}
	for _, r := range t.Rows {
		r.summarise()
	}
	t.ratios()
	return t, nil
}

func (b *bench) progress(sc Scenario, e libs.Entry, r Measurement) {
	if b.cfg.Progress == nil {
		return
	}
	if sc.kind == holds {
		fmt.Fprintf(b.cfg.Progress, "%-12s r%d %-26s held %d lost %d  %6.0f cmds/s  %5.1f ms CPU/s  overlaps %d  errors %d %s\n",
			sc.ID, r.Round, e.Label(), r.Held, r.Lost, float64(r.Commands)/r.seconds(), msf(r.ClientCPU)/r.seconds(),
			r.Overlaps, r.AcquireErrs+r.UnlockErrs, r.FirstError)
		return
	}
	fmt.Fprintf(b.cfg.Progress, "%-12s r%d %-26s %8.0f acq/s %8.0f handoffs/s  p99 %8.2f ms  %5.1f cmds/acq  overlaps %d  errors %d %s\n",
		sc.ID, r.Round, e.Label(), r.AcqPerSec(), r.HandoffsPerSec(), r.WaitP99, r.per(float64(r.Commands)),
		r.Overlaps, r.AcquireErrs+r.LateErrs+r.UnlockErrs, r.FirstError)
}
