// Package libs adapts each lock library under test (and the client-library
// round-trip floors) to one small interface, so the scenarios drive all of
// them with the same loop. Each adapter uses the library the way its
// documentation shows; settings are stated in the Entry.
package libs

import (
	"context"
	"errors"
	"time"
)

// Env is what an Instance connects to and how it waits.
type Env struct {
	Redis []string // redis-server addresses; [0] for single-node scenarios, all for RedLock
	Etcd  string   // etcd client URL
	// ZooKeeper is the ZooKeeper server's address (host:port).
	ZooKeeper string
	// Wait bounds one acquisition (the same budget for every library).
	Wait time.Duration
	// Lease, when non-zero, is the lease every library renews automatically
	// (the long-holds scenario); zero keeps each library's hot-path default.
	Lease time.Duration
}

// Entry is one library in one setting: one row of a table.
type Entry struct {
	Lib     string // "dlock", "redsync", ...
	Variant string // "Mutex", "defaults", "fast", ...
	Setting string // the setting, in words
	Client  string // the client library underneath: "go-redis", "rueidis" or "etcd"
	Floor   bool   // a round-trip floor (two PINGs), not a lock
	// Open connects clients separate client objects (each with its own
	// connection pool) for the workers to share round-robin.
	Open func(ctx context.Context, env Env, clients int) (Instance, error)
}

// Label is "lib variant".
func (e Entry) Label() string { return e.Lib + " " + e.Variant }

// Instance is an opened library: its clients and their background work.
type Instance interface {
	// Worker returns the handle worker i uses, sequentially, on lock name.
	Worker(i int, name string) (Worker, error)
	// Close releases every client; workers must be done.
	Close() error
}

// Worker locks one name for one worker; Lock and Unlock alternate.
type Worker interface {
	// Lock waits up to Env.Wait; ctx ends the wait early (the run is over).
	Lock(ctx context.Context) error
	// Unlock releases; an error means the lock was lost or not released.
	Unlock(ctx context.Context) error
}

// ErrWaitTimeout is returned by adapters whose library reports an expired
// wait in no recognisable way of its own.
var ErrWaitTimeout = errors.New("libs: wait ran out")

// ErrLost is returned by Unlock when the library reported the lock lost
// while it was held (a renewal failed, the lock context was cancelled).
var ErrLost = errors.New("libs: lock lost while held")

// closers closes in reverse order, joining errors.
type closers []func() error

func (cs closers) close() error {
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		errs = append(errs, cs[i]())
	}
	return errors.Join(errs...)
}
