package suite

import (
	"context"
	"math/rand/v2"
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
func drive(ctx context.Context, workers []libs.Worker, slotOf func(worker int) *measure.Slot, d, work time.Duration) window {
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
					slot := slotOf(i)
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
	workers, slots, slotOf, err := openWorkers(inst, sc, name)
	if err != nil {
		return run, err
	}
	if b.cfg.Warmup > 0 {
		drive(ctx, workers, slotOf, b.cfg.Warmup, sc.Work)
	}
	for _, s := range slots {
		s.Reset()
	}
	onRedis := b.env.consensusPID(e.Client) == 0
	before, err := b.env.snap(ctx, sc.Nodes, e.Client)
	if err != nil {
		return run, err
	}
	sampled := make(chan int64, 1)
	if sc.SampleKeys && onRedis {
		go func() {
			select {
			case <-time.After(b.cfg.Duration / 2):
			case <-ctx.Done():
			}
			n, _ := b.env.keyBytes(ctx, sc.Nodes)
			sampled <- n
		}()
	}
	win := drive(ctx, workers, slotOf, b.cfg.Duration, sc.Work)
	after, err := b.env.snap(ctx, sc.Nodes, e.Client)
	if err != nil {
		return run, err
	}
	if sc.SampleKeys && onRedis {
		run.RedisKeyBytes = <-sampled
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
	for _, s := range slots {
		_, o, h := s.Counts()
		run.Overlaps += o
		run.Handoffs += h
	}
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
	run.ScriptCalls = run.CommandMix["evalsha"] + run.CommandMix["eval"] + run.CommandMix["fcall"]
	run.Mallocs = after.proc.Mallocs - before.proc.Mallocs
	run.ClientCPU = after.clientCPU - before.clientCPU
	run.ServerCPU = after.serverCPU - before.serverCPU
	run.Goroutines = after.proc.Goroutines - before.proc.Goroutines
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func lockName(sc Scenario, n int) string { return "bench:" + sc.ID + ":" + strconv.Itoa(n) }

// namesPerWorker is how many names each worker of a many-names scenario
// draws up front.
const namesPerWorker = 256

// openWorkers opens the workers of a contended scenario on name, or, with
// sc.Names > 1, on names drawn from sc.Names names derived from it: each
// worker then picks one of its names at random for every acquisition. It
// returns the witness slots (one per name) and which slot a worker's current
// acquisition is on.
func openWorkers(inst libs.Instance, sc Scenario, name string) ([]libs.Worker, []*measure.Slot, func(int) *measure.Slot, error) {
	workers := make([]libs.Worker, sc.Workers)
	if sc.Fresh {
		slots := make([]*measure.Slot, sc.Workers)
		for i := range workers {
			workers[i] = &freshWorker{inst: inst, i: i, prefix: name + ":" + strconv.Itoa(i) + ":"}
			slots[i] = measure.NewSlot()
		}
		return workers, slots, func(i int) *measure.Slot { return slots[i] }, nil
	}
	if sc.Names <= 1 {
		for i := range workers {
			w, err := inst.Worker(i, name)
			if err != nil {
				return nil, nil, nil, err
			}
			workers[i] = w
		}
		slot := measure.NewSlot()
		return workers, []*measure.Slot{slot}, func(int) *measure.Slot { return slot }, nil
	}
	slots := make([]*measure.Slot, sc.Names)
	for i := range slots {
		slots[i] = measure.NewSlot()
	}
	rng := rand.New(rand.NewPCG(1, uint64(len(name))))
	multis := make([]*multiWorker, sc.Workers)
	for i := range workers {
		m := &multiWorker{rng: rand.New(rand.NewPCG(uint64(i), 2))}
		for _, n := range rng.Perm(sc.Names)[:min(namesPerWorker, sc.Names)] {
			w, err := inst.Worker(i, name+":"+strconv.Itoa(n))
			if err != nil {
				return nil, nil, nil, err
			}
			m.ws, m.names = append(m.ws, w), append(m.names, n)
		}
		workers[i], multis[i] = m, m
	}
	return workers, slots, func(i int) *measure.Slot { return slots[multis[i].names[multis[i].cur]] }, nil
}

// multiWorker is one worker over several names: each Lock picks one at
// random, and Unlock releases that one.
type multiWorker struct {
	ws    []libs.Worker
	names []int
	rng   *rand.Rand
	cur   int
}

func (m *multiWorker) Lock(ctx context.Context) error {
	m.cur = m.rng.IntN(len(m.ws))
	return m.ws[m.cur].Lock(ctx)
}

func (m *multiWorker) Unlock(ctx context.Context) error { return m.ws[m.cur].Unlock(ctx) }

// freshWorker is one worker that takes a lock on a name never used before
// for every acquisition (a lock per order id), through a lock handle made
// for that acquisition, the way the libraries' READMEs call them.
type freshWorker struct {
	inst   libs.Instance
	i      int
	prefix string
	seq    int
	w      libs.Worker
}

func (f *freshWorker) Lock(ctx context.Context) error {
	f.seq++
	w, err := f.inst.Worker(f.i, f.prefix+strconv.Itoa(f.seq))
	if err != nil {
		return err
	}
	f.w = w
	return w.Lock(ctx)
}

func (f *freshWorker) Unlock(ctx context.Context) error { return f.w.Unlock(ctx) }
