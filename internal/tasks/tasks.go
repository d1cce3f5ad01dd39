// Package tasks counts the goroutines a lock client started, so that its
// Close can wait for them within a bound (a sync.WaitGroup's Wait has
// none).
package tasks

import (
	"context"
	"sync"
)

// Group counts running tasks. The zero Group is ready; it is safe for
// concurrent use, and may be added to while Wait waits.
type Group struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // made by Wait while tasks run; closed when none is left
}

// Add adds delta (which may be negative) to the count of running tasks,
// as sync.WaitGroup.Add does.
func (g *Group) Add(delta int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n += delta
	switch {
	case g.n < 0:
		panic("tasks: negative count")
	case g.n == 0 && g.idle != nil:
		close(g.idle)
		g.idle = nil
	}
}

// Done ends one task.
func (g *Group) Done() { g.Add(-1) }

// Go runs f in a new goroutine counted by g.
func (g *Group) Go(f func()) {
	g.Add(1)
	go func() {
		defer g.Done()
		f()
	}()
}

// Wait waits until no task runs or ctx is done, and reports whether none
// runs.
func (g *Group) Wait(ctx context.Context) bool {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return true
	}
	if g.idle == nil {
		g.idle = make(chan struct{})
	}
	idle := g.idle
	g.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-ctx.Done():
		return false
	}
}
