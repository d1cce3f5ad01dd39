package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/table"
	"github.com/dlockgo/dlock/internal/redisproc"
)

// Failover modes.
const (
	ModePlain      = "plain"       // lock, then read-check-write
	ModeReplicaAck = "replica_ack" // lock with ReplicaAck(1, 100ms), then read-check-write
	ModeFenced     = "fenced"      // lock, then a fenced conditional write
)

// FailoverModes lists the modes in order.
var FailoverModes = []string{ModePlain, ModeReplicaAck, ModeFenced}

// FailoverOptions configure the failover drill. Zero values take defaults.
type FailoverOptions struct {
	Fault      string        // "crash" (SIGKILL the master) or "partition" (cut it off)
	Runs       int           // runs per mode; default 5
	Modes      []string      // default FailoverModes
	Workers    int           // workers, each with its own clients; default 8
	SKUs       int           // skus (locks) the workers spread over; default 8
	Section    time.Duration // time inside the lock before the write; default 2ms
	Lease      time.Duration // fixed lease; default 2s
	Replicas   int           // replicas of the master; default 2
	ReplDelay  time.Duration // latency added to the replication link; default 0
	Before     time.Duration // sale before the fault; default 1s
	After      time.Duration // sale after recovery; default 1s
	Partition  time.Duration // how long the partition lasts after the promotion; default 2s
	StaleShare float64       // partition: share of workers that still reach the old master; default 0.5
	// MinReplicasToWrite sets min-replicas-to-write (with min-replicas-max-lag
	// 1) on the master: an old master cut off from its replicas then refuses
	// writes. 0 leaves it unset.
	MinReplicasToWrite int
	Seed               uint64
	Progress           func(what string, done, total int)
}

func (o *FailoverOptions) defaults() error {
	if o.Fault != "crash" && o.Fault != "partition" {
		return fmt.Errorf("failover: fault %q: want crash or partition", o.Fault)
	}
	o.Runs = orDefault(o.Runs, 5)
	if len(o.Modes) == 0 {
		o.Modes = FailoverModes
	}
	for _, m := range o.Modes {
		if !slices.Contains(FailoverModes, m) {
			return fmt.Errorf("failover: mode %q: want one of %s", m, strings.Join(FailoverModes, ", "))
		}
	}
	o.Workers = orDefault(o.Workers, 8)
	o.SKUs = orDefault(o.SKUs, 8)
	o.Section = orDefault(o.Section, 2*time.Millisecond)
	o.Lease = orDefault(o.Lease, 2*time.Second)
	o.Replicas = orDefault(o.Replicas, 2)
	o.Before = orDefault(o.Before, time.Second)
	o.After = orDefault(o.After, time.Second)
	o.Partition = orDefault(o.Partition, 2*time.Second)
	o.StaleShare = orDefault(o.StaleShare, 0.5)
	if o.Runs < 1 || o.Workers < 1 || o.SKUs < 1 || o.Replicas < 1 || o.Section < 0 || o.Lease <= 0 || o.ReplDelay < 0 ||
		o.StaleShare <= 0 || o.StaleShare >= 1 || o.MinReplicasToWrite < 0 {
		return errors.New("failover: runs, workers, skus, replicas >= 1; lease > 0; 0 < stale share < 1")
	}
	return nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// FailoverCounts are what one run counted, or the sums of a mode's runs.
type FailoverCounts struct {
	Acquisitions        int   `json:"acquisitions"`
	WindowAcquisitions  int   `json:"window_acquisitions"`
	DoubleGrants        int   `json:"double_grants"` // by the witness (the spans)
	LocksLostAtFailover int   `json:"locks_lost_at_failover"`
	Oversold            int64 `json:"oversold"`
	StaleWritesRejected int64 `json:"stale_writes_rejected"`
	AcquireErrors       int64 `json:"acquire_errors"`
	// FailoverMS is the time from the fault to the promotion (a mode's:
	// the mean over its runs).
	FailoverMS float64 `json:"failover_ms"`
	// LongestGapMS is the longest stretch, from the fault to the end of the
	// run, in which no worker acquired any lock (a mode's: the longest
	// over its runs).
	LongestGapMS float64 `json:"longest_gap_ms"`
}

// FailoverRun is one run of one mode.
type FailoverRun struct {
	Run         int    `json:"run"`
	Mode        string `json:"mode"`
	HeldAtFault int    `json:"held_at_fault"`
	FailoverCounts
}

// FailoverMode sums one mode's runs.
type FailoverMode struct {
	Runs            int     `json:"runs"`
	DoubleGrantRate float64 `json:"double_grant_rate"` // of the acquisitions in the window
	FailoverCounts
}

// add counts one more run of the mode.
func (m *FailoverMode) add(r FailoverCounts) {
	m.Runs++
	m.Acquisitions += r.Acquisitions
	m.WindowAcquisitions += r.WindowAcquisitions
	m.DoubleGrants += r.DoubleGrants
	m.LocksLostAtFailover += r.LocksLostAtFailover
	m.Oversold += r.Oversold
	m.StaleWritesRejected += r.StaleWritesRejected
	m.AcquireErrors += r.AcquireErrors
	m.FailoverMS += (r.FailoverMS - m.FailoverMS) / float64(m.Runs)
	m.LongestGapMS = max(m.LongestGapMS, r.LongestGapMS)
	if m.WindowAcquisitions > 0 {
		m.DoubleGrantRate = float64(m.DoubleGrants) / float64(m.WindowAcquisitions)
	}
}

// FailoverResult is what the failover drill measured.
type FailoverResult struct {
	Fault      string                  `json:"fault"`
	Workers    int                     `json:"workers"`
	SKUs       int                     `json:"skus"`
	SectionMS  float64                 `json:"section_ms"`
	LeaseMS    float64                 `json:"lease_ms"`
	Replicas   int                     `json:"replicas"`
	Modes      map[string]FailoverMode `json:"modes"`
	Runs       []FailoverRun           `json:"runs"`
	order      []string
	spans      []Span
	marks      []Mark
	reportMode string
}

// Failover runs the failover drill (000 §2.9, 002 §4.2): a master with
// replicas and three Sentinels, workers selling many skus under per-sku
// locks, and one fault per run — the master SIGKILLed, or cut off from its
// replicas, the Sentinels and the clients on their side while the other
// clients still reach it (the articles' incident: two masters accept lock
// writes until the partition heals). An independent witness (every holder
// records entering and leaving its sku on one monotonic clock) counts double
// grants; the ledger counts oversold units.
func Failover(ctx context.Context, o FailoverOptions) (*FailoverResult, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	res := &FailoverResult{Fault: o.Fault, Workers: o.Workers, SKUs: o.SKUs, SectionMS: msf(o.Section),
		LeaseMS: msf(o.Lease), Replicas: o.Replicas, Modes: map[string]FailoverMode{}, order: o.Modes}
	total, done := o.Runs*len(o.Modes), 0
	for run := 1; run <= o.Runs; run++ {
		for _, mode := range o.Modes {
			r, sp, marks, err := failoverRun(ctx, o, run, mode)
			if err != nil {
				return nil, fmt.Errorf("failover %s run %d (%s): %w", o.Fault, run, mode, err)
			}
			res.Runs = append(res.Runs, r)
			m := res.Modes[mode]
			m.add(r.FailoverCounts)
			res.Modes[mode] = m
			if res.spans == nil || (mode == ModePlain && r.DoubleGrants > 0) {
				res.spans, res.marks, res.reportMode = sp, marks, mode
			}
			done++
			if o.Progress != nil {
				o.Progress("failover", done, total)
			}
		}
	}
	return res, nil
}

func failoverRun(ctx context.Context, o FailoverOptions, run int, mode string) (FailoverRun, []Span, []Mark, error) {
	r := FailoverRun{Run: run, Mode: mode}
	dir, err := os.MkdirTemp("", "dlock-failover-")
	if err != nil {
		return r, nil, nil, err
	}
	defer os.RemoveAll(dir)

	px := newProxies()
	defer px.close()
	links := map[string]*toxiproxy.Proxy{}
	var masterArgs []string
	if o.MinReplicasToWrite > 0 {
		masterArgs = []string{"--min-replicas-to-write", strconv.Itoa(o.MinReplicasToWrite), "--min-replicas-max-lag", "1"}
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	sent, err := redisproc.StartSentinel(sctx, redisproc.SentinelOptions{
		Replicas: o.Replicas, MasterArgs: masterArgs, Dir: dir,
		Route: func(role, master string) (string, error) {
			p, err := px.add(role, master)
			if err != nil {
				return "", err
			}
			links[role] = p
			return p.Listen, nil
		},
	})
	if err != nil {
		return r, nil, nil, err
	}
	defer sent.Close()
	if o.ReplDelay > 0 {
		if err := delay(links["replica"], o.ReplDelay); err != nil {
			return r, nil, nil, err
		}
	}
	oldMaster := links["sentinel"].Listen // the master as the Sentinels (and their clients) see it

	skus := skuNames(o.SKUs)
	led, err := openLedger(ctx, dir, skus, failoverStock)
	if err != nil {
		return r, nil, nil, err
	}
	defer led.close()

	stale := 0
	if o.Fault == "partition" {
		stale = max(1, int(float64(o.Workers)*o.StaleShare))
	}
	locks := make([]func(string) dlock.Locker, o.Workers)
	for w := range locks {
		var rdb *redis.Client
		if w < stale { // on the old master's side of the partition
			rdb = redis.NewClient(&redis.Options{Addr: sent.Master.Addr(), DialTimeout: 300 * time.Millisecond,
				ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1})
		} else {
			rdb = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: sent.MasterName, SentinelAddrs: sent.SentinelAddrs(),
				DialTimeout: 300 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1})
		}
		defer rdb.Close()
		c, err := dlock.New(rdb, dlock.Config{Label: "worker-" + strconv.Itoa(w)})
		if err != nil {
			return r, nil, nil, err
		}
		defer c.Close()
		locks[w] = func(name string) dlock.Locker { return c.Lock(name) }
	}
	opts := []dlock.Option{dlock.LeaseTime(o.Lease), dlock.Wait(o.Lease)}
	if mode == ModeReplicaAck {
		opts = append(opts, dlock.ReplicaAck(1, 100*time.Millisecond))
	}
	sale := startSale(ctx, skus, o.Seed, locks, opts, func(l *dlock.Lease, sku string) error {
		return section(l.Context(), led, mode, sku, l.Token(), o.Section)
	})
	defer sale.finish()
	tl := sale.tl

	if err := sleep(ctx, o.Before); err != nil {
		return r, nil, nil, err
	}
	held := tl.Held()
	faultAt := msf(tl.Since())
	marks := []Mark{{AtMS: faultAt, Label: o.Fault}}
	if o.Fault == "crash" {
		err = sent.Master.Kill()
	} else {
		err = errors.Join(blackhole(links["replica"]), blackhole(links["sentinel"]))
	}
	if err != nil {
		return r, nil, nil, err
	}
	had, err := replicaHolds(ctx, sent.Replicas, held)
	if err != nil {
		return r, nil, nil, err
	}
	fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
	newMaster, err := sent.WaitForFailover(fctx, oldMaster)
	fcancel()
	if err != nil {
		return r, nil, nil, err
	}
	recovered := msf(tl.Since())
	r.FailoverMS = recovered - faultAt
	marks = append(marks, Mark{AtMS: recovered, Label: "promoted " + newMaster})
	r.HeldAtFault = len(held)
	r.LocksLostAtFailover = len(held) - had[newMaster]
	if o.Fault == "partition" {
		if err := sleep(ctx, o.Partition); err != nil {
			return r, nil, nil, err
		}
		if err := errors.Join(heal(links["replica"]), heal(links["sentinel"])); err != nil {
			return r, nil, nil, err
		}
		healed := msf(tl.Since())
		marks = append(marks, Mark{AtMS: healed, Label: "healed"})
		recovered = healed
	}
	if err := sleep(ctx, o.After); err != nil {
		return r, nil, nil, err
	}
	end := msf(tl.Since())
	sale.finish()

	spans := tl.Spans()
	r.Acquisitions, r.DoubleGrants = len(spans), DoubleGrants(spans)
	r.LongestGapMS = longestGap(spans, faultAt, end)
	windowEnd := recovered + msf(o.Lease)
	for _, s := range spans {
		if s.StartMS >= faultAt && s.StartMS <= windowEnd {
			r.WindowAcquisitions++
		}
	}
	r.StaleWritesRejected, r.AcquireErrors = sale.rejected.Load(), sale.failed.Load()
	if r.Oversold, err = led.oversold(ctx); err != nil {
		return r, nil, nil, err
	}
	return r, reportSpans(spans, faultAt, windowEnd), marks, nil
}

// section is the critical section of one sale in mode.
func section(ctx context.Context, led *ledger, mode, sku string, token int64, think time.Duration) error {
	if mode == ModeFenced {
		if err := sleep(ctx, think); err != nil {
			return err
		}
		return led.sellFenced(context.WithoutCancel(ctx), sku, token)
	}
	qty, err := led.read(ctx, sku)
	if err != nil {
		return err
	}
	if qty < 1 {
		return errSoldOut
	}
	if err := sleep(ctx, think); err != nil {
		return err
	}
	// No check of the lease here on purpose: this is the write that a lost
	// lock does not stop (a pause, a failover that lost the key).
	return led.sellPlain(context.WithoutCancel(ctx), sku, qty, token)
}

// replicaHolds reads, on every replica, which of the held locks it has
// (same fencing token), right after the fault: what a promoted replica
// will know. It returns the count per replica address.
func replicaHolds(ctx context.Context, replicas []*redisproc.Server, held []Span) (map[string]int, error) {
	out := map[string]int{}
	for _, rep := range replicas {
		rdb := redis.NewClient(&redis.Options{Addr: rep.Addr(), MaxRetries: -1})
		c, err := dlock.New(rdb)
		if err != nil {
			rdb.Close()
			return nil, err
		}
		for _, h := range held {
			info, err := c.Inspect(ctx, "stock:"+h.Lane)
			if err == nil && info.Held && info.Holders[0].Fence == h.Token {
				out[rep.Addr()]++
			}
		}
		c.Close()
		rdb.Close()
	}
	return out, nil
}

// Summary returns what the text and the HTML report show: every run, the
// sums per mode, and the holders of each sku around the fault of one run
// (a plain one with a double grant if any had one).
func (r *FailoverResult) Summary() *Summary {
	var runs, modes []failoverRow
	for _, x := range r.Runs {
		runs = append(runs, failoverRow{strconv.Itoa(x.Run), x.Mode, "", x.FailoverCounts})
	}
	for _, m := range r.order {
		x := r.Modes[m]
		modes = append(modes, failoverRow{"", m, fmt.Sprintf("%.4f%%", 100*x.DoubleGrantRate), x.FailoverCounts})
	}
	perRun, perMode := failoverTable(runs, false), failoverTable(modes, true)
	perRun.Title, perMode.Title = "every run:", "per mode:"
	return &Summary{
		Title: fmt.Sprintf("failover (%s): %s on %s, %.0f ms inside the lock, lease %.0f ms, %s, %s per mode",
			r.Fault, plural(r.Workers, "worker"), plural(r.SKUs, "sku"), r.SectionMS, r.LeaseMS, plural(r.Replicas, "replica"),
			plural(len(r.Runs)/max(1, len(r.order)), "run")),
		Tables:        []table.Table{perRun, perMode},
		TimelineTitle: fmt.Sprintf("Holders per sku around the fault of one %s run (double grants in red)", r.reportMode),
		Spans:         r.spans, Marks: r.marks,
	}
}

// failoverRow is one row of the failover drill's tables: a run, or a
// mode's sums with its double-grant rate.
type failoverRow struct {
	run, mode, rate string
	FailoverCounts
}

// failoverTable lays out the runs (perMode false: with a run column) or
// the modes (with the double-grant rate).
func failoverTable(rows []failoverRow, perMode bool) table.Table {
	var cols []table.Column[failoverRow]
	if !perMode {
		cols = append(cols, table.Col("run", func(x failoverRow) string { return x.run }))
	}
	cols = append(cols,
		table.Col("mode", func(x failoverRow) string { return x.mode }),
		table.Col("acquisitions", func(x failoverRow) string { return strconv.Itoa(x.Acquisitions) }),
		table.Col("in window", func(x failoverRow) string { return strconv.Itoa(x.WindowAcquisitions) }),
		table.Col("double grants", func(x failoverRow) string { return strconv.Itoa(x.DoubleGrants) }))
	if perMode {
		cols = append(cols, table.Col("double-grant rate", func(x failoverRow) string { return x.rate }))
	}
	cols = append(cols,
		table.Col("locks lost at failover", func(x failoverRow) string { return strconv.Itoa(x.LocksLostAtFailover) }),
		table.Col("oversold", func(x failoverRow) string { return strconv.FormatInt(x.Oversold, 10) }),
		table.Col("stale writes rejected", func(x failoverRow) string { return strconv.FormatInt(x.StaleWritesRejected, 10) }),
		table.Col("acquire errors", func(x failoverRow) string { return strconv.FormatInt(x.AcquireErrors, 10) }),
		table.Col("failover ms", func(x failoverRow) string { return fmt.Sprintf("%.0f", x.FailoverMS) }),
		table.Col("longest gap ms", func(x failoverRow) string { return fmt.Sprintf("%.0f", x.LongestGapMS) }))
	return table.Of(cols, rows)
}
