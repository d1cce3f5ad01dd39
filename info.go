package dlock

import "time"

// Info is what Inspect reads about one lock name.
type Info struct {
	Name    string
	Shape   string   // "mutex", "lock", "fair", "rw", "semaphore", ...; "" when free and nobody waits
	Held    bool     // held right now
	Holders []Holder // who holds it
	// TTL is the remaining lease of the lock as a whole; < 0: none (free,
	// or each holder has its own). On a store that keeps locks by a
	// session (etcd, ZooKeeper) it is a bound, not a countdown: how long
	// the hold outlives its holder's last sign of life.
	TTL time.Duration
	// LastFence is the last fencing token granted for this name (0: none
	// kept), or a bound above it where the store keeps one counter for many
	// names (Redis: the counter of the name's hash slot).
	LastFence int64
	// Queue lists the waiters the store keeps, next first (an RWLock's
	// waiting writers by deadline).
	Queue []Waiter
	// Permits is a Semaphore's permit count; Holders are the permits in use.
	Permits int
}

// Oldest returns the earliest Since of the lock's holders: since when it
// has been held, as its holders' clocks say (zero when no holder's is
// known). List puts the oldest first.
func (i Info) Oldest() time.Time {
	var t time.Time
	for _, h := range i.Holders {
		if !h.Since.IsZero() && (t.IsZero() || h.Since.Before(t)) {
			t = h.Since
		}
	}
	return t
}

// Holder describes one holder of a lock, from the metadata stored with it.
type Holder struct {
	ID    string    // the first 8 characters of the holder's token or owner
	Host  string    // host name of the holding process
	PID   int       // its process id
	Label string    // its client's label (Config.Label)
	Since time.Time // when it acquired (its own clock, or the store's)
	// Count is the hold count (reentrant acquisitions) where the store
	// keeps it (Redis); 1 where the holder's client counts re-entries
	// (etcd, ZooKeeper).
	Count int
	Fence int64 // the fencing token of this grant
	// Mode is "read" or "write" for an RWLock, "" for the other shapes.
	Mode string
	// TTL is the remaining lease of this hold (a bound, as Info.TTL, on a
	// session store): RWLock readers and Semaphore permits have their own;
	// other holders share the lock's.
	TTL time.Duration
}

// Waiter describes one Acquire call waiting in the store.
type Waiter struct {
	ID    string    // the first 8 characters of its owner or token
	Host  string    // host name of the waiting process
	PID   int       // its process id
	Label string    // its client's label
	Since time.Time // when its Acquire call started (its own clock)
	Mode  string    // "write" for an RWLock writer, "read" for a reader (where the store queues readers), "" otherwise
	// Deadline is the time left before it loses its place unless it
	// refreshes it (a live waiter does), or < 0 when its place lives as
	// long as its session (etcd, ZooKeeper).
	Deadline time.Duration
}

// Removal is what a backend client's ForceUnlock removed.
type Removal struct {
	// Info is the lock as Inspect read it just before the removal (Shape
	// "" and no Holders when its key was not of a shape Inspect knows).
	Info
	// Keys are the keys deleted, sorted; empty when nothing was held.
	// The fence counter is never among them.
	Keys []string
}
