package tasks

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// TestWait: Wait returns at once with nothing running, when the last task
// ends, or when its ctx ends first (reporting false); tasks may be added
// while it waits.
func TestWait(t *testing.T) {
	var g Group
	if !g.Wait(context.Background()) {
		t.Fatal("Wait with no task reported tasks running")
	}
	release := make(chan struct{})
	g.Go(func() { <-release })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if g.Wait(ctx) {
		t.Fatal("Wait reported no task while one ran")
	}
	done := make(chan bool)
	go func() { done <- g.Wait(context.Background()) }()
	g.Add(1) // a second task, added while Wait waits
	close(release)
	select {
	case <-done:
		t.Fatal("Wait returned with a task still running")
	case <-time.After(30 * time.Millisecond):
	}
	g.Done()
	if !<-done {
		t.Fatal("Wait after every task ended reported tasks running")
	}
}
