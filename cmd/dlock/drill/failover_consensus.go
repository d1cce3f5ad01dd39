package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/fence"
)

// Faults of the consensus failover drill.
const (
	FaultKill  = "kill"  // SIGKILL the leader, restart it after Down
	FaultPause = "pause" // SIGSTOP the leader, SIGCONT after Down
	// FaultPartition black-holes the leader's client connections (every
	// client reaches the members through a proxy), healed after Down; the
	// members keep talking to each other, so the leader stays leader and the
	// clients on its side must move to another member.
	FaultPartition = "partition"
)

// ConsensusFaults lists the consensus failover drill's faults.
var ConsensusFaults = []string{FaultKill, FaultPause, FaultPartition}

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
	if o.Backend != backend.Etcd && o.Backend != backend.ZooKeeper {
		return fmt.Errorf("failover: backend %q: want %s or %s", o.Backend, backend.Etcd, backend.ZooKeeper)
	}
	if o.Fault == "crash" {
		o.Fault = FaultKill
	}
	switch o.Fault {
	case FaultKill, FaultPause, FaultPartition:
	default:
		return fmt.Errorf("failover: fault %q: want kill, pause or partition", o.Fault)
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

// ensemble is a 3-member cluster the drill injects faults into.
type ensemble interface {
	// Addr is the client endpoints, as backend.Open takes them.
	Addr() string
	// Leader returns the index of the current leader.
	Leader(ctx context.Context) (int, error)
	Kill(i int) error
	Restart(ctx context.Context, i int) error
	Pause(i int) error
	Resume(i int) error
	// Partition black-holes the clients' connections to member i (its
	// peers still reach it); Heal undoes it.
	Partition(i int) error
	Heal(i int) error
	Close() error
}

// startEnsemble starts a 3-member cluster of kind under dir.
var startEnsemble = map[string]func(ctx context.Context, dir string) (ensemble, error){}

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
		t := &res.Total
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

func consensusRun(ctx context.Context, o ConsensusFailoverOptions, start func(context.Context, string) (ensemble, error), run int) (ConsensusRun, []Span, []Mark, error) {
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

	skus := make([]string, o.SKUs)
	for i := range skus {
		skus[i] = fmt.Sprintf("sku-%d", i)
	}
	const stock = 1 << 40 // never sells out: every double grant can show as an oversell
	ledgers := [2]*ledger{}
	for i, name := range []string{"plain", "fenced"} {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o700); err != nil {
			return r, nil, nil, err
		}
		if ledgers[i], err = openLedger(ctx, d, skus, stock); err != nil {
			return r, nil, nil, err
		}
		defer ledgers[i].close()
	}
	plain, fenced := ledgers[0], ledgers[1]

	clients := make([]backend.Client, o.Workers)
	for w := range clients {
		if clients[w], err = b.NewClient(ctx, backend.ClientOptions{Label: "worker-" + strconv.Itoa(w), Session: o.Session}); err != nil {
			return r, nil, nil, err
		}
		defer clients[w].Close()
	}
	wit := &spanWitness{t0: time.Now()}
	var rejected, failed, lost atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w, c := range clients {
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
				// A bounded wait, so that a worker stuck behind a dead
				// connection tries again (and the run can end). The lease's
				// Context derives from ctx: ctx must outlive the hold.
				l, err := c.Lock("stock:"+sku).Acquire(ctx, dlock.Wait(2*o.Session+o.Down))
				if err != nil {
					failed.Add(1)
					_ = sleep(ctx, 20*time.Millisecond) // the service is down or refusing: don't spin
					continue
				}
				i := wit.enter(sku, w, l.Token())
				err = section(l.Context(), plain, ModePlain, sku, l.Token(), o.Section)
				if err == nil { // the fenced write, after the plain one, in the same hold
					err = fenced.sellFenced(context.WithoutCancel(ctx), sku, l.Token())
				}
				wit.exit(i)
				if errors.Is(err, fence.ErrStale) {
					rejected.Add(1)
				}
				if errors.Is(l.Unlock(context.WithoutCancel(ctx)), dlock.ErrLockLost) {
					lost.Add(1)
				}
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
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	r.OldLeader, err = ens.Leader(lctx)
	lcancel()
	if err != nil {
		return r, nil, nil, err
	}
	held := wit.held()
	faultAt := time.Since(wit.t0)
	marks := []Mark{{AtMS: msf(faultAt), Label: o.Fault + " leader m" + strconv.Itoa(r.OldLeader)}}
	switch o.Fault {
	case FaultKill:
		err = ens.Kill(r.OldLeader)
	case FaultPause:
		err = ens.Pause(r.OldLeader)
	case FaultPartition:
		err = ens.Partition(r.OldLeader)
	}
	if err != nil {
		return r, nil, nil, err
	}
	if err := sleep(ctx, o.Down); err != nil {
		return r, nil, nil, err
	}
	switch o.Fault {
	case FaultKill:
		rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
		if rerr := ens.Restart(rctx, r.OldLeader); rerr != nil && ctx.Err() == nil {
			r.RestartError = firstLine(rerr.Error())
		}
		rcancel()
	case FaultPause:
		err = ens.Resume(r.OldLeader)
	case FaultPartition:
		err = ens.Heal(r.OldLeader)
	}
	if err != nil {
		return r, nil, nil, err
	}
	back := time.Since(wit.t0)
	marks = append(marks, Mark{AtMS: msf(back), Label: "leader back"})
	if err := sleep(ctx, o.After); err != nil {
		return r, nil, nil, err
	}
	end := time.Since(wit.t0)
	finish()
	lctx, lcancel = context.WithTimeout(ctx, 10*time.Second)
	if nl, err := ens.Leader(lctx); err == nil {
		r.NewLeader = nl
	}
	lcancel()

	n, spans, bad := wit.doubleGrants()
	r.Acquisitions, r.DoubleGrants, r.HeldAtFault = len(spans), n, len(held)
	r.LongestGapMS = msf(longestGap(spans, faultAt, end))
	r.StaleWritesRejected, r.FailedAcquires, r.LocksLost = rejected.Load(), failed.Load(), int(lost.Load())
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
	return r, reportSpans(spans, bad, faultAt, back+o.Session), marks, nil
}

// Print writes the result for people.
func (r *ConsensusFailoverResult) Print(w io.Writer) {
	fmt.Fprintf(w, "failover on %s (%d members, fault: %s the leader for %.0f ms): %d workers on %d skus, %.0f ms inside the lock, session %.0f ms\n\n",
		r.Backend, r.Members, r.Fault, r.DownMS, r.Workers, r.SKUs, r.SectionMS, r.SessionMS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tleader\tacquisitions\tdouble grants\theld at fault\tlocks lost\tfailed acquires\tlongest gap ms\toversold plain\toversold fenced\tstale writes rejected\t")
	row := func(name, leader string, x ConsensusRun) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.0f\t%d\t%d\t%d\t\n", name, leader, x.Acquisitions, x.DoubleGrants, x.HeldAtFault,
			x.LocksLost, x.FailedAcquires, x.LongestGapMS, x.OversoldPlain, x.OversoldFenced, x.StaleWritesRejected)
	}
	for _, x := range r.Runs {
		nl := "?"
		if x.NewLeader >= 0 {
			nl = "m" + strconv.Itoa(x.NewLeader)
		}
		row(strconv.Itoa(x.Run), fmt.Sprintf("m%d→%s", x.OldLeader, nl), x)
	}
	row("all", "", r.Total)
	tw.Flush()
	for _, x := range r.Runs {
		if x.RestartError != "" {
			fmt.Fprintf(w, "run %d: the killed leader did not rejoin in time: %s\n", x.Run, x.RestartError)
		}
	}
}

// Report returns the drill's HTML report: the holders of each sku around
// the fault of one run (one with a double grant if any had one).
func (r *ConsensusFailoverResult) Report() *Report {
	t := r.Total
	return &Report{
		Title: fmt.Sprintf("failover on %s (%s the leader): holders per sku around the fault", r.Backend, r.Fault),
		Spans: r.spans, Marks: r.marks,
		Figures: [][2]string{
			{"runs", strconv.Itoa(len(r.Runs))},
			{"acquisitions", strconv.Itoa(t.Acquisitions)},
			{"double grants (witness)", strconv.Itoa(t.DoubleGrants)},
			{"locks lost / failed acquires", fmt.Sprintf("%d / %d", t.LocksLost, t.FailedAcquires)},
			{"longest stretch without an acquisition", fmt.Sprintf("%.0f ms", t.LongestGapMS)},
			{"oversold: plain / fenced ledger", fmt.Sprintf("%d / %d (%d stale writes rejected)", t.OversoldPlain, t.OversoldFenced, t.StaleWritesRejected)},
		},
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
