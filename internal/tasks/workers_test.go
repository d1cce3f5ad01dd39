package tasks

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// workers counts the goroutines in a Workers' work loop, and those of them
// parked waiting for the next function.
func workers() (running, parked int) {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "tasks.(*Workers).work(") {
			running++
			if strings.Contains(g, " [select") {
				parked++
			}
		}
	}
	return running, parked
}

// TestWorkersReuse: functions handed one after another run on one worker
// (the second waits for no new goroutine), every one runs exactly once,
// and Close makes the idle worker exit at once and waits for it.
func TestWorkersReuse(t *testing.T) {
	var w Workers
	var ran atomic.Int32
	for i := range 100 {
		done := make(chan struct{})
		if !w.Go(func() { ran.Add(1); close(done) }) {
			t.Fatal("Go refused before Close")
		}
		<-done
		// The worker parks again before it can take the next function:
		// wait for that (a busy client's next call may find it still
		// running and start a second).
		deadline := time.Now().Add(5 * time.Second)
		for {
			running, parked := workers()
			if running == 1 && parked == 1 {
				break
			}
			if running > 1 || time.Now().After(deadline) {
				t.Fatalf("%d workers (%d parked) after function %d ended, want 1 parked", running, parked, i)
			}
			runtime.Gosched()
		}
	}
	if n := ran.Load(); n != 100 {
		t.Fatalf("%d functions ran, want 100", n)
	}
	// Close ends the idle worker: it does not wait for its idle time.
	ctx, cancel := context.WithTimeout(context.Background(), WorkerIdle/2)
	defer cancel()
	if !w.Close(ctx) {
		t.Fatalf("Close: the idle worker did not exit within %v", WorkerIdle/2)
	}
	if n, _ := workers(); n != 0 {
		t.Fatalf("%d workers after Close", n)
	}
}

// TestWorkersConcurrent: functions that block run side by side, each on
// a worker of its own.
func TestWorkersConcurrent(t *testing.T) {
	var w Workers
	release := make(chan struct{})
	var started atomic.Int32
	all := make(chan struct{})
	for range 8 {
		w.Go(func() {
			if started.Add(1) == 8 {
				close(all)
			}
			<-release
		})
	}
	select {
	case <-all:
	case <-time.After(5 * time.Second):
		t.Fatalf("%d of 8 blocking functions started", started.Load())
	}
	close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if !w.Close(ctx) {
		t.Fatal("Close: workers still running")
	}
}

// TestWorkersClose: Close waits for a running function until its ctx
// ends (reporting false), refuses every later function (which does not
// run), and is idempotent.
func TestWorkersClose(t *testing.T) {
	var w Workers
	release := make(chan struct{})
	w.Go(func() { <-release })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if w.Close(ctx) {
		t.Fatal("Close reported no worker while one ran")
	}
	var ran atomic.Bool
	if w.Go(func() { ran.Store(true) }) {
		t.Fatal("Go after Close accepted a function")
	}
	close(release)
	if !w.Close(context.Background()) {
		t.Fatal("second Close: a worker still runs")
	}
	if ran.Load() {
		t.Fatal("a function handed after Close ran")
	}
	var unused Workers // Close of a Workers never used
	if !unused.Close(context.Background()) {
		t.Fatal("Close of an unused Workers")
	}
}
