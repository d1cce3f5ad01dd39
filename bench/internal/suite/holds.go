package suite

import (
	"cmp"
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
	holdFor, lease := cmp.Or(sc.HoldFor, b.cfg.HoldFor), cmp.Or(sc.HoldLease, b.cfg.HoldLease)
	heap0 := heapAfterGC()
	g0 := runtime.NumGoroutine()
	inst, err := e.Open(ctx, b.libEnv(sc, lease), sc.Clients)
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
	held0 := 0
	for _, h := range held {
		if h {
			held0++
		}
	}
	if held0 > 0 {
		run.HeapPerHold = float64(int64(heapAfterGC())-int64(heap0)) / float64(held0)
	}

	before, err := b.env.snap(ctx, sc.Nodes, "")
	if err != nil {
		return run, err
	}
	rt0 := roundTrips(inst)
	t := time.NewTimer(holdFor)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
	}
	after, err := b.env.snap(ctx, sc.Nodes, "")
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
	run.Ticks = run.Elapsed.Seconds() / (lease / 3).Seconds()
	if run.RedisKeyBytes, err = b.env.keyBytes(ctx, sc.Nodes); err != nil {
		return run, err
	}

	probe := make([]bool, n) // held through the window: the loss probe watches them
	for i, w := range workers {
		if !held[i] {
			continue
		}
		run.Held++
		probe[i] = true
		if lr, ok := w.(lossReporter); ok && lr.Lost() {
			run.Lost++
			probe[i] = false
		}
	}
	if err := b.lossProbe(ctx, sc, &run, workers, probe, lease); err != nil {
		return run, err
	}
	for i, w := range workers {
		if !held[i] {
			continue
		}
		slots[i].Exit()
		// every hold was lost by the probe: the errors are its doing
		_ = w.Unlock(context.Background())
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

// heapAfterGC is the live Go heap after a full collection (two, 50 ms
// apart, so that what a closed library's goroutines still held is gone).
func heapAfterGC() uint64 {
	runtime.GC()
	time.Sleep(50 * time.Millisecond)
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// lossProbe deletes every key (FLUSHALL) and measures how long each held
// lock's holder takes to report the loss, polling every 20 ms for up to a
// lease and 2 s more. Libraries whose workers cannot report a loss are
// skipped (LossSeen stays 0).
func (b *bench) lossProbe(ctx context.Context, sc Scenario, run *Measurement, workers []libs.Worker, held []bool, lease time.Duration) error {
	var watch []lossReporter
	for i, w := range workers {
		if lr, ok := w.(lossReporter); ok && held[i] {
			watch = append(watch, lr)
		}
	}
	if err := b.env.flush(ctx, sc.Nodes); err != nil {
		return err
	}
	start := time.Now()
	if len(watch) == 0 {
		return nil
	}
	var delays []time.Duration
	deadline := start.Add(lease + 2*time.Second)
	for len(watch) > 0 && time.Now().Before(deadline) && ctx.Err() == nil {
		left := watch[:0]
		now := time.Since(start)
		for _, lr := range watch {
			if lr.Lost() {
				delays = append(delays, now)
			} else {
				left = append(left, lr)
			}
		}
		watch = left
		time.Sleep(20 * time.Millisecond)
	}
	run.LossSeen = len(delays)
	if len(delays) > 0 {
		s := measure.Summarise(delays)
		run.LossP50, run.LossMax = msf(s.P50), msf(s.Max)
	}
	return ctx.Err()
}
