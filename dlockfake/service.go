package dlockfake

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// Service is a lock service in memory: what a Redis, an etcd cluster or a
// ZooKeeper ensemble is to their clients. Every Client made from one
// Service shares its locks, as processes share a server; the Service keeps
// the clock their leases run on, the faults the test injects, and the
// record of what the clients did. It is safe for concurrent use and needs
// no closing (Close its Clients).
type Service struct {
	clock *vclock
	host  string // this process's host name, as Inspect shows it

	mu      sync.Mutex
	names   map[string]*entry // the names held or waited for
	counts  map[string]int    // each Semaphore's permit count, kept once set
	fences  map[string]int64  // the last token granted on each name
	last    int64             // the last token granted on any name
	tickets uint64            // the last place given in a queue
	parked  map[string]int    // Acquire calls waiting on each name (AwaitWaiters)
	changed chan struct{}     // closed, and replaced, at every change
	faults  faults
	clients int

	recMu  sync.Mutex
	record []Event
}

// New returns a Service whose clock stands still until the test moves it
// with Advance: leases run out, renewals fall due and waits end only then,
// in the order of their times, each at its time. A test on it needs no
// sleep and gives the same result on every run.
func New() *Service { return newService(false) }

// NewRealTime returns a Service whose clock follows the real one (Advance
// still moves it ahead): for code whose tests wait in real time, and for
// the conformance suite (dlocktest), which does.
func NewRealTime() *Service { return newService(true) }

func newService(realTime bool) *Service {
	host, _ := os.Hostname()
	return &Service{
		clock:   newClock(realTime),
		host:    strings.ReplaceAll(host, "|", "_"),
		names:   make(map[string]*entry),
		counts:  make(map[string]int),
		fences:  make(map[string]int64),
		parked:  make(map[string]int),
		changed: make(chan struct{}),
		faults:  newFaults(),
	}
}

// Now returns the time on the Service's clock.
func (s *Service) Now() time.Time { return s.clock.Now() }

// Advance moves the Service's clock forward by d (d <= 0 does nothing).
// Everything that falls due on the way happens before Advance returns, in
// the order of its time and at that time: a lease whose deadline passes is
// lost (its Done closed, its Context cancelled, the Observer told; OnLost
// runs in its own goroutine), a renewal is sent, a wait that runs out
// ends (the Acquire call returns in its own goroutine). A paused Client
// sees none of it until Resume.
func (s *Service) Advance(d time.Duration) { s.clock.advance(d) }

// AwaitWaiters returns once n Acquire calls of name (or of a MultiLock
// over it) are waiting in the Service: queued behind a holder, blocked by
// BlockAcquires, or with a grant in flight (DelayGrants). Call it before
// Advance when the code under test acquires in another goroutine, so that
// the clock moves once that call waits on it. It returns ctx's error if
// ctx ends first, and an error wrapping dlock.ErrInvalidArgument for n < 1.
func (s *Service) AwaitWaiters(ctx context.Context, name string, n int) error {
	if err := seam.CheckContext(ctx); err != nil {
		return seam.Wrap("await", "", name, err)
	}
	if err := seam.CheckName(name); err != nil {
		return seam.Wrap("await", "", name, err)
	}
	if n < 1 {
		return seam.Wrap("await", "", name, fmt.Errorf("%w: %d waiters (want at least 1)", dlock.ErrInvalidArgument, n))
	}
	for {
		s.mu.Lock()
		got, ch := s.parked[name], s.changed
		s.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return seam.Wrap("await", "", name, fmt.Errorf("%w (%d of %d waiters)", ctx.Err(), got, n))
		}
	}
}

// changedLocked wakes everyone waiting for a change; s.mu is held.
func (s *Service) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}
