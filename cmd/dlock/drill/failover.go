package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
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

// FailoverRun is one run of one mode.
type FailoverRun struct {
	Run                 int     `json:"run"`
	Mode                string  `json:"mode"`
	Acquisitions        int     `json:"acquisitions"`
	WindowAcquisitions  int     `json:"window_acquisitions"`
	DoubleGrants        int     `json:"double_grants"`
	HeldAtFault         int     `json:"held_at_fault"`
	LocksLostAtFailover int     `json:"locks_lost_at_failover"`
	Oversold            int64   `json:"oversold"`
	StaleWritesRejected int64   `json:"stale_writes_rejected"`
	AcquireErrors       int64   `json:"acquire_errors"`
	FailoverMS          float64 `json:"failover_ms"`
	// LongestGapMS is the longest stretch, from the fault to the end of the
	// run, in which no worker acquired any lock.
	LongestGapMS float64 `json:"longest_gap_ms"`
}

// FailoverMode sums one mode's runs.
type FailoverMode struct {
	Runs                int     `json:"runs"`
	Acquisitions        int     `json:"acquisitions"`
	WindowAcquisitions  int     `json:"window_acquisitions"`
	DoubleGrants        int     `json:"double_grants"`
	DoubleGrantRate     float64 `json:"double_grant_rate"`
	LocksLostAtFailover int     `json:"locks_lost_at_failover"`
	Oversold            int64   `json:"oversold"`
	StaleWritesRejected int64   `json:"stale_writes_rejected"`
	AcquireErrors       int64   `json:"acquire_errors"`
	FailoverMS          float64 `json:"failover_ms"`    // mean over runs
	LongestGapMS        float64 `json:"longest_gap_ms"` // the longest over runs
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

// holdSpan is one holder inside one sku.
type holdSpan struct {
	sku        string
	worker     int
	start, end time.Duration
	token      int64
	open       bool
}

// witness records holds on one monotonic clock.
type spanWitness struct {
	t0    time.Time
	mu    sync.Mutex
	spans []holdSpan
}

func (w *spanWitness) enter(sku string, worker int, token int64) int {
	at := time.Since(w.t0)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spans = append(w.spans, holdSpan{sku: sku, worker: worker, start: at, end: at, token: token, open: true})
	return len(w.spans) - 1
}

func (w *spanWitness) exit(i int) {
	at := time.Since(w.t0)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.spans[i].end, w.spans[i].open = at, false
}

// held returns the holds open now.
func (w *spanWitness) held() []holdSpan {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []holdSpan
	for _, s := range w.spans {
		if s.open {
			out = append(out, s)
		}
	}
	return out
}

// doubleGrants counts holds that began while another holder of the same sku
// was inside, and marks them; it returns the spans sorted per sku.
func (w *spanWitness) doubleGrants() (int, []holdSpan, map[int]bool) {
	w.mu.Lock()
	spans := append([]holdSpan(nil), w.spans...)
	w.mu.Unlock()
	sort.SliceStable(spans, func(i, j int) bool {
		if spans[i].sku != spans[j].sku {
			return spans[i].sku < spans[j].sku
		}
		return spans[i].start < spans[j].start
	})
	bad := map[int]bool{}
	n := 0
	var maxEnd time.Duration
	maxIdx := -1
	for i, s := range spans {
		if i > 0 && spans[i-1].sku != s.sku {
			maxEnd, maxIdx = 0, -1
		}
		if maxIdx >= 0 && s.start < maxEnd {
			n++
			bad[i], bad[maxIdx] = true, true
		}
		if s.end > maxEnd {
			maxEnd, maxIdx = s.end, i
		}
	}
	return n, spans, bad
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

	skus := make([]string, o.SKUs)
	for i := range skus {
		skus[i] = fmt.Sprintf("sku-%d", i)
	}
	const stock = 1 << 40 // never sells out: every double grant can show as an oversell
	led, err := openLedger(ctx, dir, skus, stock)
	if err != nil {
		return r, nil, nil, err
	}
	defer led.close()

	wit := &spanWitness{t0: time.Now()}
	var rejected, acqErrs atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	stale := 0
	if o.Fault == "partition" {
		stale = max(1, int(float64(o.Workers)*o.StaleShare))
	}
	for w := 0; w < o.Workers; w++ {
		var rdb *redis.Client
		if w < stale { // on the old master's side of the partition
			rdb = redis.NewClient(&redis.Options{Addr: sent.Master.Addr(), DialTimeout: 300 * time.Millisecond,
				ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1})
		} else {
			rdb = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: sent.MasterName, SentinelAddrs: sent.SentinelAddrs(),
				DialTimeout: 300 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond, MaxRetries: -1})
		}
		defer rdb.Close()
		locks, err := dlock.New(rdb, dlock.WithLabel("worker-"+strconv.Itoa(w)))
		if err != nil {
			return r, nil, nil, err
		}
		defer locks.Close()
		opts := []dlock.Option{dlock.LeaseTime(o.Lease), dlock.Wait(o.Lease)}
		if mode == ModeReplicaAck {
			opts = append(opts, dlock.ReplicaAck(1, 100*time.Millisecond))
		}
		rng := rand.New(rand.NewPCG(o.Seed, uint64(w)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				sku := skus[rng.IntN(len(skus))]
				l, err := locks.Lock("stock:"+sku).Acquire(ctx, opts...)
				if err != nil {
					acqErrs.Add(1)
					_ = sleep(ctx, 20*time.Millisecond) // Redis down or refusing: don't spin
					continue
				}
				i := wit.enter(sku, w, l.Token())
				err = section(l.Context(), led, mode, sku, l.Token(), o.Section)
				wit.exit(i)
				if errors.Is(err, fence.ErrStale) {
					rejected.Add(1)
				}
				_ = l.Unlock(context.WithoutCancel(ctx))
			}
		}()
	}
	finish := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer finish()

	if err := sleep(ctx, o.Before); err != nil {
		return r, nil, nil, err
	}
	held := wit.held()
	faultAt := time.Since(wit.t0)
	marks := []Mark{{AtMS: msf(faultAt), Label: o.Fault}}
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
	recovered := time.Since(wit.t0)
	r.FailoverMS = msf(recovered - faultAt)
	marks = append(marks, Mark{AtMS: msf(recovered), Label: "promoted " + newMaster})
	r.HeldAtFault = len(held)
	r.LocksLostAtFailover = len(held) - had[newMaster]
	if o.Fault == "partition" {
		if err := sleep(ctx, o.Partition); err != nil {
			return r, nil, nil, err
		}
		if err := errors.Join(heal(links["replica"]), heal(links["sentinel"])); err != nil {
			return r, nil, nil, err
		}
		healed := time.Since(wit.t0)
		marks = append(marks, Mark{AtMS: msf(healed), Label: "healed"})
		recovered = healed
	}
	if err := sleep(ctx, o.After); err != nil {
		return r, nil, nil, err
	}
	finish()

	n, spans, bad := wit.doubleGrants()
	r.Acquisitions, r.DoubleGrants = len(spans), n
	r.LongestGapMS = msf(longestGap(spans, faultAt, time.Since(wit.t0)))
	windowEnd := recovered + o.Lease
	for _, s := range spans {
		if s.start >= faultAt && s.start <= windowEnd {
			r.WindowAcquisitions++
		}
	}
	r.StaleWritesRejected, r.AcquireErrors = rejected.Load(), acqErrs.Load()
	if r.Oversold, err = led.oversold(ctx); err != nil {
		return r, nil, nil, err
	}
	return r, reportSpans(spans, bad, faultAt, windowEnd), marks, nil
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
func replicaHolds(ctx context.Context, replicas []*redisproc.Server, held []holdSpan) (map[string]int, error) {
	out := map[string]int{}
	for _, rep := range replicas {
		rdb := redis.NewClient(&redis.Options{Addr: rep.Addr(), MaxRetries: -1})
		c, err := dlock.New(rdb)
		if err != nil {
			rdb.Close()
			return nil, err
		}
		for _, h := range held {
			info, err := c.Inspect(ctx, "stock:"+h.sku)
			if err == nil && info.Held && info.Holders[0].Fence == h.token {
				out[rep.Addr()]++
			}
		}
		c.Close()
		rdb.Close()
	}
	return out, nil
}

// reportSpans keeps the spans around the fault for the HTML report.
func reportSpans(spans []holdSpan, bad map[int]bool, from, to time.Duration) []Span {
	var out []Span
	for i, s := range spans {
		if s.end < from-200*time.Millisecond || s.start > to+200*time.Millisecond {
			continue
		}
		out = append(out, Span{Lane: s.sku, Who: "w" + strconv.Itoa(s.worker), StartMS: msf(s.start), EndMS: msf(s.end), Bad: bad[i]})
		if len(out) >= 5000 {
			break
		}
	}
	return out
}

// Print writes the result for people.
func (r *FailoverResult) Print(w io.Writer) {
	fmt.Fprintf(w, "failover (%s): %d workers on %d skus, %.0f ms inside the lock, lease %.0f ms, %d replicas, %d runs per mode\n\n",
		r.Fault, r.Workers, r.SKUs, r.SectionMS, r.LeaseMS, r.Replicas, len(r.Runs)/max(1, len(r.order)))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tmode\tacquisitions\tin window\tdouble grants\tlocks lost at failover\toversold\tstale writes rejected\tacquire errors\tfailover ms\tlongest gap ms\t")
	for _, x := range r.Runs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t\n", x.Run, x.Mode, x.Acquisitions, x.WindowAcquisitions,
			x.DoubleGrants, x.LocksLostAtFailover, x.Oversold, x.StaleWritesRejected, x.AcquireErrors, x.FailoverMS, x.LongestGapMS)
	}
	tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tacquisitions\tin window\tdouble grants\tdouble-grant rate\tlocks lost at failover\toversold\tstale writes rejected\tacquire errors\tfailover ms\tlongest gap ms\t")
	for _, m := range r.order {
		x := r.Modes[m]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.4f%%\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t\n", m, x.Acquisitions, x.WindowAcquisitions,
			x.DoubleGrants, 100*x.DoubleGrantRate, x.LocksLostAtFailover, x.Oversold, x.StaleWritesRejected, x.AcquireErrors, x.FailoverMS, x.LongestGapMS)
	}
	tw.Flush()
}

// Report returns the drill's HTML report: the holders of each sku around
// the fault (double grants in red).
func (r *FailoverResult) Report() *Report {
	rep := &Report{
		Title: fmt.Sprintf("failover (%s): holders per sku around the fault, %s mode", r.Fault, r.reportMode),
		Spans: r.spans, Marks: r.marks,
	}
	for _, m := range r.order {
		x := r.Modes[m]
		rep.Figures = append(rep.Figures, [2]string{m, fmt.Sprintf("%d double grants in %d acquisitions in the window (%.4f%%), %d locks lost at failover, oversold %d, %d stale writes rejected, failover %.0f ms",
			x.DoubleGrants, x.WindowAcquisitions, 100*x.DoubleGrantRate, x.LocksLostAtFailover, x.Oversold, x.StaleWritesRejected, x.FailoverMS)})
	}
	return rep
}

// longestGap returns the longest stretch in [from, to] in which no span
// started: the time the service granted no lock at all.
func longestGap(spans []holdSpan, from, to time.Duration) time.Duration {
	starts := make([]time.Duration, 0, len(spans))
	for _, s := range spans {
		if s.start >= from && s.start <= to {
			starts = append(starts, s.start)
		}
	}
	slices.Sort(starts)
	gap, last := time.Duration(0), from
	for _, at := range starts {
		gap, last = max(gap, at-last), at
	}
	return max(gap, to-last)
}
