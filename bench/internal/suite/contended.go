package suite

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/bench/internal/libs"
	"github.com/dlockgo/dlock/bench/internal/measure"
)

// maxErrorsPerWorker stops a worker whose acquisitions keep failing (a dead
// server): the failures are counted, the run does not spin.
const maxErrorsPerWorker = 1000

// workerStats is what one worker saw in one window; only that worker
// writes it until the window is over.
type workerStats struct {
	n          int64
	waits      []time.Duration
	acqErrs    int64
	unlockErrs int64
	lateErrs   int64 // waits begun in the window that failed after it closed
	firstErr   error
}

// window is the outcome of driving the workers for one window.
type window struct {
	stats   []workerStats
	elapsed time.Duration
	drain   time.Duration // from the end of the window until every worker stopped
}

// drive runs every worker in a loop (acquire, enter the slot, work, exit,
// release) for d, then stops them. Waits in progress are not cancelled (a
// cancelled acquisition can leave a key behind in some libraries, which
// would skew the next window): they drain. An acquisition that completes
// after the window is released uncounted; one that fails after it (its wait
// budget ran out: a waiter starved) is counted as a late failure. Only ctx
// ending cancels waits. Waits are measured from the call to Lock to its
// return.
func drive(ctx context.Context, workers []libs.Worker, slot *measure.Slot, d, work time.Duration) window {
	var stop atomic.Bool
	stats := make([]workerStats, len(workers))
	for i := range stats {
		stats[i].waits = make([]time.Duration, 0, 1024)
	}
	var wg sync.WaitGroup
	start := time.Now()
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &stats[i]
			for !stop.Load() && st.acqErrs < maxErrorsPerWorker {
				t0 := time.Now()
				err := w.Lock(ctx)
				wait := time.Since(t0)
				if err != nil {
					if stop.Load() {
						st.lateErrs++
						if st.firstErr == nil {
							st.firstErr = err
						}
						return
					}
					st.acqErrs++
					if st.firstErr == nil {
						st.firstErr = err
					}
					continue
				}
				late := stop.Load()
				if !late {
					slot.Enter(i)
					if work > 0 {
						time.Sleep(work)
					}
					slot.Exit()
					st.n++
					st.waits = append(st.waits, wait)
				}
				if err := w.Unlock(context.Background()); err != nil && !late {
					st.unlockErrs++
					if st.firstErr == nil {
						st.firstErr = err
					}
				}
			}
		}()
	}
	t := time.NewTimer(d)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	stop.Store(true)
	elapsed := time.Since(start)
	wg.Wait()
	return window{stats: stats, elapsed: elapsed, drain: time.Since(start) - elapsed}
}

// runContended measures one library in a contended (or uncontended)
// scenario: open, warm up, measure one window, close.
func (b *bench) runContended(ctx context.Context, sc Scenario, e libs.Entry, name string) (Measurement, error) {
	var run Measurement
	inst, err := e.Open(ctx, b.libEnv(sc, 0), sc.Clients)
	if err != nil {
		return run, err
	}
	defer inst.Close()
	workers := make([]libs.Worker, sc.Workers)
	for i := range workers {
		if workers[i], err = inst.Worker(i, name); err != nil {
			return run, err
		}
	}
	slot := measure.NewSlot()
	if b.cfg.Warmup > 0 {
		drive(ctx, workers, slot, b.cfg.Warmup, sc.Work)
	}
	slot.Reset()
	etcd := e.Client == "etcd"
	before, err := b.env.snap(ctx, sc.Nodes, etcd)
	if err != nil {
		return run, err
	}
	win := drive(ctx, workers, slot, b.cfg.Duration, sc.Work)
	after, err := b.env.snap(ctx, sc.Nodes, etcd)
	if err != nil {
		return run, err
	}
	if err := ctx.Err(); err != nil {
		return run, err
	}

	run.Elapsed, run.Drain = win.elapsed, win.drain
	var all []time.Duration
	counts := make([]int64, len(win.stats))
	for i, st := range win.stats {
		counts[i] = st.n
		run.Acquisitions += st.n
		run.AcquireErrs += st.acqErrs
		run.UnlockErrs += st.unlockErrs
		run.LateErrs += st.lateErrs
		if st.firstErr != nil && run.FirstError == "" {
			run.FirstError = st.firstErr.Error()
		}
		all = append(all, st.waits...)
	}
	_, run.Overlaps, run.Handoffs = slot.Counts()
	w := measure.Summarise(all)
	run.WaitP50, run.WaitP99, run.WaitMax = msf(w.P50), msf(w.P99), msf(w.Max)
	if sc.Workers > 1 {
		run.Jain = measure.Jain(counts)
	}
	b.fillCounters(&run, before, after)
	return run, nil
}

// fillCounters sets the counter deltas of a window.
func (b *bench) fillCounters(run *Measurement, before, after snapshot) {
	run.CommandMix, run.Commands = measure.CommandDelta(before.cmds, after.cmds)
	run.ScriptCalls = run.CommandMix["evalsha"] + run.CommandMix["eval"]
	run.Mallocs = after.proc.Mallocs - before.proc.Mallocs
	run.ClientCPU = after.clientCPU - before.clientCPU
	run.ServerCPU = after.serverCPU - before.serverCPU
	run.Goroutines = after.proc.Goroutines - before.proc.Goroutines
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func lockName(sc Scenario, n int) string { return "bench:" + sc.ID + ":" + strconv.Itoa(n) }
