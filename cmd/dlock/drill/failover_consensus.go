package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/table"
)

// Faults of the consensus failover drill.
const (
	FaultKill  = "kill"  // SIGKILL the leader, restart it after Down
	FaultPause = "pause" // SIGSTOP the leader, SIGCONT after Down
	// FaultPartition cuts the leader off from its peers (the links between
	// members run through proxies) while every client still reaches it,
	// healed after Down: the case of etcd#11456. The majority elects a
	// leader of its own; clients that reach only the old leader hold locks
	// across the cut and must be told they lost them before the majority
	// grants them again (see failover_partition.go).
	FaultPartition = "partition"
	// FaultCutClients black-holes the leader's client connections (every
	// client reaches the members through a proxy), healed after Down; the
	// members keep talking to each other, so the leader stays leader and the
	// clients on its side must move to another member.
	FaultCutClients = "cut-clients"
)

// ConsensusFaults lists the consensus failover drill's faults.
var ConsensusFaults = []string{FaultKill, FaultPause, FaultPartition, FaultCutClients}

// ConsensusFailoverOptions configure the failover drill on a 3-member etcd
// cluster or a 3-server ZooKeeper ensemble. Zero values take defaults.
type ConsensusFailoverOptions struct {
	Backend string        // backend.Etcd or backend.ZooKeeper
	Fault   string        // one of ConsensusFaults
	Runs    int           // default 10
	Workers int           // workers, each its own client and session; default 64
	SKUs    int           // skus (locks) the workers spread over; default 8
	Section time.Duration // time inside the lock before the writes; default 2ms
	// Session is every client's session (etcd lease TTL, ZooKeeper session
	// timeout; the server may round it up); default 2s.
	Session time.Duration
	Before  time.Duration // sale before the fault; default 2s
	Down    time.Duration // how long the leader stays killed, frozen or cut off; default 3s
	After   time.Duration // sale after the leader is back; default 2s
	Seed    uint64
	// Progress is called after every run.
	Progress func(what string, done, total int)
}

func (o *ConsensusFailoverOptions) defaults() error {
	if _, ok := startEnsemble[o.Backend]; !ok {
		return fmt.Errorf("failover: backend %q: want %s", o.Backend, ensembleKinds())
	}
	if o.Fault == "crash" {
		o.Fault = FaultKill
	}
	if _, ok := faultOps[o.Fault]; !ok {
		return fmt.Errorf("failover: fault %q: want one of %s", o.Fault, strings.Join(ConsensusFaults, ", "))
	}
	o.Runs = orDefault(o.Runs, 10)
	o.Workers = orDefault(o.Workers, 64)
	o.SKUs = orDefault(o.SKUs, 8)
	o.Section = orDefault(o.Section, 2*time.Millisecond)
	o.Session = orDefault(o.Session, 2*time.Second)
	o.Before = orDefault(o.Before, 2*time.Second)
	o.Down = orDefault(o.Down, 3*time.Second)
	o.After = orDefault(o.After, 2*time.Second)
	if o.Runs < 1 || o.Workers < 1 || o.SKUs < 1 || o.Section < 0 || o.Session <= 0 || o.Before <= 0 || o.Down <= 0 || o.After <= 0 {
		return errors.New("failover: runs, workers, skus >= 1; section >= 0; session, before, down, after > 0")
	}
	return nil
}

// ConsensusRun is one run of the consensus failover drill.
type ConsensusRun struct {
	Run          int `json:"run"`
	Acquisitions int `json:"acquisitions"`
	// DoubleGrants counts holds that began while another holder of the
	// same sku was inside, as an independent witness saw them.
	DoubleGrants int `json:"double_grants"`
	HeldAtFault  int `json:"held_at_fault"`
	// LocksLost counts holders told their lock was lost (session expired or
	// unconfirmed) before they released it.
	LocksLost int `json:"locks_lost"`
	// FailedAcquires counts Acquire calls that returned an error.
	FailedAcquires int64 `json:"failed_acquires"`
	// LongestGapMS is the longest stretch from the fault to the end of the
	// run in which no worker acquired any lock.
	LongestGapMS float64 `json:"longest_gap_ms"`
	// SoldPlain and SoldFenced count the units each ledger recorded sold.
	SoldPlain           int64 `json:"sold_plain"`
	SoldFenced          int64 `json:"sold_fenced"`
	OversoldPlain       int64 `json:"oversold_plain"`
	OversoldFenced      int64 `json:"oversold_fenced"`
	StaleWritesRejected int64 `json:"stale_writes_rejected"`
	OldLeader           int   `json:"old_leader"` // member index (0-based)
	NewLeader           int   `json:"new_leader"` // member index after the run, -1 if unknown
	// RestartError says why the killed leader did not rejoin in time (the
	// run goes on on the other members); "" when it did.
	RestartError string `json:"restart_error,omitempty"`
	// TokensOutOfOrder counts grants whose fencing token is not above the
	// previous grant's on the same sku (0 on a correct service).
	TokensOutOfOrder int `json:"tokens_out_of_order"`

	// FaultPartition only (0 otherwise). MinorityHolds counts the locks
	// held across the cut by clients that reach only the old leader;
	// ToldInTime how many of them were told they lost their lock before
	// the majority granted it again; MinMarginMS the smallest time from a
	// loss signal to the next grant of that lock (negative: a double
	// grant); ElectedMS the time from the cut until the majority had a
	// leader of its own; RegrantMS the longest time from the cut until
	// the majority granted a minority-held lock again.
	MinorityHolds int     `json:"minority_holds,omitempty"`
	ToldInTime    int     `json:"told_in_time,omitempty"`
	MinMarginMS   float64 `json:"min_margin_ms,omitempty"`
	ElectedMS     float64 `json:"elected_ms,omitempty"`
	RegrantMS     float64 `json:"regrant_ms,omitempty"`
}

// add counts one more run into the sums (the longest gap is the longest).
func (t *ConsensusRun) add(r ConsensusRun) {
	t.Run++
	t.Acquisitions += r.Acquisitions
	t.DoubleGrants += r.DoubleGrants
	t.HeldAtFault += r.HeldAtFault
	t.LocksLost += r.LocksLost
	t.FailedAcquires += r.FailedAcquires
	t.LongestGapMS = max(t.LongestGapMS, r.LongestGapMS)
	t.SoldPlain += r.SoldPlain
	t.SoldFenced += r.SoldFenced
	t.OversoldPlain += r.OversoldPlain
	t.OversoldFenced += r.OversoldFenced
	t.StaleWritesRejected += r.StaleWritesRejected
	t.TokensOutOfOrder += r.TokensOutOfOrder
	if r.MinorityHolds > 0 {
		if t.MinorityHolds == 0 || r.MinMarginMS < t.MinMarginMS {
			t.MinMarginMS = r.MinMarginMS
		}
		t.MinorityHolds += r.MinorityHolds
		t.ToldInTime += r.ToldInTime
		t.ElectedMS = max(t.ElectedMS, r.ElectedMS)
		t.RegrantMS = max(t.RegrantMS, r.RegrantMS)
	}
}

// ConsensusFailoverResult is what the consensus failover drill measured.
type ConsensusFailoverResult struct {
	Backend   string         `json:"backend"`
	Fault     string         `json:"fault"`
	Members   int            `json:"members"`
	Workers   int            `json:"workers"`
	SKUs      int            `json:"skus"`
	SectionMS float64        `json:"section_ms"`
	SessionMS float64        `json:"session_ms"`
	DownMS    float64        `json:"down_ms"`
	Runs      []ConsensusRun `json:"runs"`
	Total     ConsensusRun   `json:"total"` // sums; longest_gap_ms is the longest
	spans     []Span
	marks     []Mark
}

// FailoverConsensus runs the failover drill on a 3-member etcd cluster or a
// 3-server ZooKeeper ensemble: o.Workers workers, each its own client and
// session, sell many skus under per-sku locks; in every run the leader is
// killed, frozen (SIGSTOP) or cut off for o.Down and then brought back.
// Every holder writes twice: a plain read-check-write to one ledger and a
// fenced write to another, and an independent witness records entering and
// leaving on one monotonic clock, so a double grant shows whatever the
// lock service believes.
func FailoverConsensus(ctx context.Context, o ConsensusFailoverOptions) (*ConsensusFailoverResult, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	start, ok := startEnsemble[o.Backend]
	if !ok {
		return nil, fmt.Errorf("failover: no %s cluster harness built in", o.Backend)
	}
	res := &ConsensusFailoverResult{Backend: o.Backend, Fault: o.Fault, Members: 3, Workers: o.Workers, SKUs: o.SKUs,
		SectionMS: msf(o.Section), SessionMS: msf(o.Session), DownMS: msf(o.Down)}
	for run := 1; run <= o.Runs; run++ {
		r, sp, marks, err := consensusRun(ctx, o, start, run)
		if err != nil {
			return nil, fmt.Errorf("failover %s %s run %d: %w", o.Backend, o.Fault, run, err)
		}
		res.Runs = append(res.Runs, r)
		res.Total.add(r)
		if res.spans == nil || r.DoubleGrants > 0 {
			res.spans, res.marks = sp, marks
		}
		if o.Progress != nil {
			o.Progress("failover", run, o.Runs)
		}
	}
	res.Total.OldLeader, res.Total.NewLeader = -1, -1
	return res, nil
}

func consensusRun(ctx context.Context, o ConsensusFailoverOptions, start func(context.Context, string) (*ensemble, error), run int) (ConsensusRun, []Span, []Mark, error) {
	r := ConsensusRun{Run: run, NewLeader: -1}
	dir, err := os.MkdirTemp("", "dlock-failover-")
	if err != nil {
		return r, nil, nil, err
	}
	defer os.RemoveAll(dir)
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	ens, err := start(sctx, dir)
	cancel()
	if err != nil {
		return r, nil, nil, err
	}
	defer ens.Close()
	b, err := backend.Open(ctx, o.Backend, ens.Addr())
	if err != nil {
		return r, nil, nil, err
	}
	defer b.Close()

	skus := skuNames(o.SKUs)
	ledgers := [2]*ledger{}
	for i, name := range []string{"plain", "fenced"} {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			return r, nil, nil, err
		}
		if ledgers[i], err = openLedger(ctx, d, skus, failoverStock); err != nil {
			return r, nil, nil, err
		}
		defer ledgers[i].close()
	}
	plain, fenced := ledgers[0], ledgers[1]

	locks := make([]func(string) dlock.Locker, o.Workers)
	for w := range locks {
		c, err := b.NewClient(ctx, backend.ClientOptions{Label: "worker-" + strconv.Itoa(w), Session: o.Session})
		if err != nil {
			return r, nil, nil, err
		}
		defer c.Close()
		locks[w] = c.Lock
	}
	// A bounded wait, so that a worker stuck behind a dead connection
	// tries again (and the run can end).
	opts := []dlock.Option{dlock.Wait(2*o.Session + o.Down)}
	sale := startSale(ctx, skus, o.Seed, locks, opts, func(l *dlock.Lease, sku string) error {
		err := section(l.Context(), plain, ModePlain, sku, l.Token(), o.Section)
		if err == nil { // the fenced write, after the plain one, in the same hold
			err = fenced.sellFenced(context.WithoutCancel(l.Context()), sku, l.Token())
		}
		return err
	})
	defer sale.finish()
	tl := sale.tl

	if err := sleep(ctx, o.Before); err != nil {
		return r, nil, nil, err
	}
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	r.OldLeader, err = ens.Leader(lctx)
	lcancel()
	if err != nil {
		return r, nil, nil, err
	}
	var minor *minority
	if o.Fault == FaultPartition {
		if minor, err = holdMinority(ctx, o, ens, r.OldLeader, tl, skus); err != nil {
			return r, nil, nil, err
		}
		defer minor.close()
	}
	held := tl.Held()
	faultAt := msf(tl.Since())
	marks := []Mark{{AtMS: faultAt, Label: o.Fault + " leader m" + strconv.Itoa(r.OldLeader)}}
	fault := faultOps[o.Fault]
	if err := fault.inject(ens, r.OldLeader); err != nil {
		return r, nil, nil, err
	}
	downEnd := time.Now().Add(o.Down)
	if minor != nil {
		ectx, ecancel := context.WithTimeout(ctx, o.Down+30*time.Second)
		_, err := ens.LeaderOthers(ectx, r.OldLeader)
		ecancel()
		if err != nil {
			return r, nil, nil, fmt.Errorf("the majority elected no leader: %w", err)
		}
		r.ElectedMS = msf(tl.Since()) - faultAt
		marks = append(marks, Mark{AtMS: faultAt + r.ElectedMS, Label: "majority's leader"})
		// The minority's holders are told, and the majority grants their
		// locks again, while the cut lasts.
		wctx, wcancel := context.WithTimeout(ctx, max(time.Until(downEnd), 0)+2*o.Session+10*time.Second)
		err = minor.toldAndRegranted(wctx, tl)
		wcancel()
		if err != nil && ctx.Err() != nil {
			return r, nil, nil, err
		}
	}
	if err := sleep(ctx, max(time.Until(downEnd), 0)); err != nil {
		return r, nil, nil, err
	}
	if err := fault.undo(ctx, ens, r.OldLeader); err != nil {
		if o.Fault != FaultKill || ctx.Err() != nil {
			return r, nil, nil, err
		}
		r.RestartError = firstLine(err.Error()) // the run goes on on the other members
	}
	back := msf(tl.Since())
	marks = append(marks, Mark{AtMS: back, Label: "leader back"})
	if err := sleep(ctx, o.After); err != nil {
		return r, nil, nil, err
	}
	end := msf(tl.Since())
	sale.finish()
	lctx, lcancel = context.WithTimeout(ctx, 10*time.Second)
	if nl, err := ens.Leader(lctx); err == nil {
		r.NewLeader = nl
	}
	lcancel()

	spans := tl.Spans()
	r.Acquisitions, r.DoubleGrants, r.HeldAtFault = len(spans), DoubleGrants(spans), len(held)
	r.LongestGapMS = longestGap(spans, faultAt, end)
	r.StaleWritesRejected, r.FailedAcquires, r.LocksLost = sale.rejected.Load(), sale.failed.Load(), int(sale.lost.Load())
	r.TokensOutOfOrder = tokensOutOfOrder(spans)
	if minor != nil {
		minor.figures(&r, spans, faultAt)
	}
	if r.SoldPlain, err = plain.sold(ctx); err != nil {
		return r, nil, nil, err
	}
	if r.SoldFenced, err = fenced.sold(ctx); err != nil {
		return r, nil, nil, err
	}
	if r.OversoldPlain, err = plain.oversold(ctx); err != nil {
		return r, nil, nil, err
	}
	if r.OversoldFenced, err = fenced.oversold(ctx); err != nil {
		return r, nil, nil, err
	}
	return r, reportSpans(spans, faultAt, back+msf(o.Session)), marks, nil
}

// Summary returns what the text and the HTML report show: every run and
// their sums, and the holders of each sku around the fault of one run (one
// with a double grant if any had one).
func (r *ConsensusFailoverResult) Summary() *Summary {
	type named struct {
		name, leader string
		ConsensusRun
	}
	var rows []named
	var notes []string
	for _, x := range r.Runs {
		nl := "?"
		if x.NewLeader >= 0 {
			nl = "m" + strconv.Itoa(x.NewLeader)
		}
		rows = append(rows, named{strconv.Itoa(x.Run), fmt.Sprintf("m%d→%s", x.OldLeader, nl), x})
		if x.RestartError != "" {
			notes = append(notes, fmt.Sprintf("run %d: the killed leader did not rejoin in time: %s", x.Run, x.RestartError))
		}
	}
	rows = append(rows, named{"all", "", r.Total})
	t := table.Of([]table.Column[named]{
		table.Col("run", func(x named) string { return x.name }),
		table.Col("leader", func(x named) string { return x.leader }),
		table.Col("acquisitions", func(x named) string { return strconv.Itoa(x.Acquisitions) }),
		table.Col("double grants", func(x named) string { return strconv.Itoa(x.DoubleGrants) }),
		table.Col("held at fault", func(x named) string { return strconv.Itoa(x.HeldAtFault) }),
		table.Col("locks lost", func(x named) string { return strconv.Itoa(x.LocksLost) }),
		table.Col("failed acquires", func(x named) string { return strconv.FormatInt(x.FailedAcquires, 10) }),
		table.Col("longest gap ms", func(x named) string { return fmt.Sprintf("%.0f", x.LongestGapMS) }),
		table.Col("oversold plain", func(x named) string { return strconv.FormatInt(x.OversoldPlain, 10) }),
		table.Col("oversold fenced", func(x named) string { return strconv.FormatInt(x.OversoldFenced, 10) }),
		table.Col("stale writes rejected", func(x named) string { return strconv.FormatInt(x.StaleWritesRejected, 10) }),
		table.Col("tokens out of order", func(x named) string { return strconv.Itoa(x.TokensOutOfOrder) }),
	}, rows)
	t.Notes = notes
	tables := []table.Table{t}
	if r.Fault == FaultPartition {
		tables = append(tables, table.Of([]table.Column[named]{
			table.Col("run", func(x named) string { return x.name }),
			table.Col("held across the cut", func(x named) string { return strconv.Itoa(x.MinorityHolds) }),
			table.Col("told before the regrant", func(x named) string { return strconv.Itoa(x.ToldInTime) }),
			table.Col("min margin ms", func(x named) string { return fmt.Sprintf("%.0f", x.MinMarginMS) }),
			table.Col("majority's leader after ms", func(x named) string { return fmt.Sprintf("%.0f", x.ElectedMS) }),
			table.Col("regranted after ms", func(x named) string { return fmt.Sprintf("%.0f", x.RegrantMS) }),
		}, rows))
	}
	return &Summary{
		Title: fmt.Sprintf("failover on %s (%d members, fault: %s the leader for %.0f ms): %s on %s, %.0f ms inside the lock, session %.0f ms",
			r.Backend, r.Members, r.Fault, r.DownMS, plural(r.Workers, "worker"), plural(r.SKUs, "sku"), r.SectionMS, r.SessionMS),
		Tables:        tables,
		TimelineTitle: "Holders per sku around the fault of one run (double grants in red)",
		Spans:         r.spans, Marks: r.marks,
	}
}

// sold returns the units the ledger recorded sold.
func (l *ledger) sold(ctx context.Context) (int64, error) {
	var n int64
	err := l.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sales`).Scan(&n)
	return n, err
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
