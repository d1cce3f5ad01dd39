package suite

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/dlockgo/dlock/bench/internal/libs"
	"github.com/dlockgo/dlock/bench/internal/measure"
)

// lossReporter is a Worker that can tell whether its held lock was lost.
type lossReporter interface{ Lost() bool }

// roundTripCounter is an Instance that counts its renewal round trips
// (dlock: pipelines of its watchdog).
type roundTripCounter interface{ RenewalRoundTrips() int64 }

// acquireParallelism bounds how many holds are being acquired at once.
const acquireParallelism = 16

// runHolds measures one library holding sc.Workers locks (one name each) for
// HoldFor while its auto-renewal (or the adapter's renewal loop, for
// libraries without one) keeps them: Redis commands, CPU and allocations
// during the hold, and how many holds were lost.
func (b *bench) runHolds(ctx context.Context, sc Scenario, e libs.Entry, run0 int) (Measurement, error) {
	var run Measurement
	g0 := runtime.NumGoroutine()
	inst, err := e.Open(ctx, b.libEnv(sc, b.cfg.HoldLease), sc.Clients)
	if err != nil {
		return run, err
	}
	defer inst.Close()
	n := sc.Workers
	workers := make([]libs.Worker, n)
	slots := make([]*measure.Slot, n)
	for i := range workers {
		if workers[i], err = inst.Worker(i, lockName(sc, run0*n+i)); err != nil {
			return run, err
		}
		slots[i] = measure.NewSlot()
	}

	held := make([]bool, n)
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, acquireParallelism)
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := w.Lock(ctx); err != nil {
				mu.Lock()
				run.AcquireErrs++
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				return
			}
			slots[i].Enter(i)
			held[i] = true
		}()
	}
	wg.Wait()

	before, err := b.env.snap(ctx, sc.Nodes, false)
	if err != nil {
		return run, err
	}
	rt0 := roundTrips(inst)
	t := time.NewTimer(b.cfg.HoldFor)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	after, err := b.env.snap(ctx, sc.Nodes, false)
	if err != nil {
		return run, err
	}
	run.Elapsed = after.proc.At.Sub(before.proc.At)
	b.fillCounters(&run, before, after)
	run.Goroutines = after.proc.Goroutines - g0 // what holding costs in goroutines
	run.RoundTrips = run.ScriptCalls
	if rt, ok := inst.(roundTripCounter); ok {
		run.RoundTrips = rt.RenewalRoundTrips() - rt0
	}

	for i, w := range workers {
		if !held[i] {
			continue
		}
		run.Held++
		if lr, ok := w.(lossReporter); ok && lr.Lost() {
			run.Lost++
		}
		slots[i].Exit()
		if err := w.Unlock(context.Background()); err != nil {
			run.UnlockErrs++
			if firstErr == nil {
				firstErr = err
			}
		}
		entries, overlaps, _ := slots[i].Counts()
		run.Acquisitions += entries
		run.Overlaps += overlaps
	}
	if firstErr != nil {
		run.FirstError = firstErr.Error()
	}
	if err := ctx.Err(); err != nil {
		return run, err
	}
	if run.Held == 0 {
		return run, fmt.Errorf("suite: no hold acquired: %s", run.FirstError)
	}
	return run, nil
}

func roundTrips(inst libs.Instance) int64 {
	if rt, ok := inst.(roundTripCounter); ok {
		return rt.RenewalRoundTrips()
	}
	return 0
}
