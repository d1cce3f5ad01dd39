package tasks

import (
	"context"
	"sync"
	"time"
)

// WorkerIdle is how long a worker of Workers waits for the next function
// before it exits.
const WorkerIdle = time.Second

// Workers runs functions on a few reused goroutines: an idle worker takes
// the next function, else a new worker starts. A call that must not block
// its caller (a request to a server that may not answer, run beside a
// caller that watches its ctx) then runs on a stack that has grown
// already: a new goroutine per call cost the caller 10–25 µs more on a
// request as deep as a go-zookeeper transaction (zklock's
// BenchmarkAcquireDeadline). Go never blocks. The zero Workers is ready;
// it is safe for concurrent use.
type Workers struct {
	mu     sync.Mutex
	closed bool
	idle   chan func()   // made on first use; an idle worker receives on it
	done   chan struct{} // closed by Close
	n      Group
}

// Go runs f on a worker and reports true, or reports false and runs
// nothing once Close was called.
func (w *Workers) Go(f func()) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	if w.idle == nil {
		w.idle, w.done = make(chan func()), make(chan struct{})
	}
	select {
	case w.idle <- f: // an idle worker took it
		return true
	default:
	}
	w.n.Add(1)
	go w.work(f, w.idle, w.done)
	return true
}

// work runs f, then the functions handed to it, until it has been idle
// for WorkerIdle or Close was called.
func (w *Workers) work(f func(), idle <-chan func(), done <-chan struct{}) {
	defer w.n.Done()
	t := time.NewTimer(WorkerIdle)
	defer t.Stop()
	for {
		f()
		t.Reset(WorkerIdle)
		select {
		case f = <-idle:
		case <-t.C:
			return
		case <-done:
			return
		}
	}
}

// Close makes Go refuse every function from now on and the idle workers
// exit, and waits until no worker runs (a function still running ends by
// itself) or ctx is done; it reports whether none runs. Close may be
// called more than once.
func (w *Workers) Close(ctx context.Context) bool {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		if w.done != nil {
			close(w.done)
		}
	}
	w.mu.Unlock()
	return w.n.Wait(ctx)
}
