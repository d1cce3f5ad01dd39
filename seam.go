package dlock

import (
	"context"
	"fmt"
	"time"
)

// The backend seam: how a package other than this one (etcdlock, zklock, or
// your own) hands out the same *Lease the Redis shapes return.
//
// A backend grants a lock in its store and gives the grant to a Keeper:
//
//	l, err := keeper.Lease(ctx, dlock.Grant{Shape: "mutex", Name: name, ...})
//
// The Keeper supplies everything users see: the Lease, its Context
// cancelled with cause ErrLockLost on loss, Done, Err, Unlock / Extend /
// Verify driving the grant's GrantOps, the local deadline on the monotonic
// clock (the grant is assumed lost once Sent + TTL minus a drift margin has
// passed without a renewal), the Observer events and the log lines. The
// backend keeps a renewed grant alive by calling Hold.Renewed after every
// successful renewal (see Keeper.Renewing), and reports a loss it learns of
// (its session ended, the key is gone) with Hold.Lose.

// GrantOps is what a backend does for one grant it holds.
type GrantOps interface {
	// Release gives the grant up. It reports ReleasedNotOurs when the store
	// no longer held it for us (the lock was lost before the release).
	Release(ctx context.Context) (Released, error)
	// Extend makes the store keep the grant for ttl from now if it is still
	// ours; false means it is not (lost).
	Extend(ctx context.Context, ttl time.Duration) (bool, error)
	// Verify reports whether the store still holds the grant for us.
	Verify(ctx context.Context) (bool, error)
}

// Released is the outcome of GrantOps.Release.
type Released int

const (
	// ReleasedNotOurs: the grant was gone or someone else's.
	ReleasedNotOurs Released = 0
	// ReleasedFree: released.
	ReleasedFree Released = 1
	// ReleasedStillHeld: a reentrant count went down; the owner still holds
	// the lock through another Lease.
	ReleasedStillHeld Released = 2
)

// Grant is one lock a backend granted to one owner, as handed to
// Keeper.Lease.
type Grant struct {
	Shape string // the lock's shape, for events and errors: "mutex", "lock", ...
	Name  string // the lock's name
	// Key joins this grant to a live hold with the same Key (a reentrant
	// re-entry by the same owner): the new Lease shares that hold, and
	// Ops is not used. "" never joins.
	Key   string
	Owner string // the owner the Lease's Context carries (see OwnerOf)
	ID    string // Lease.ID: the holder id in the store
	Token int64  // the fencing token
	// Sent is when the request that granted the lock was sent, and TTL how
	// long from then the store keeps the grant without a renewal: the Lease
	// is lost on the client's monotonic clock at Sent + TTL - drift.
	Sent time.Time
	TTL  time.Duration
	// Renewed marks a grant the backend keeps alive with renewals (the
	// watchdog's, or a session keepalive's): missing its deadline is
	// LostUnreachable rather than LostExpired, and Keeper.Renewing lists it.
	Renewed bool
	// Lease is the lease asked for when TTL is a shorter first grant (a
	// Redis hand-off): the Keeper extends the grant to Lease when two thirds
	// of TTL have passed, unless it was extended or renewed before. 0: TTL.
	Lease  time.Duration
	Ops    GrantOps
	OnLost func(*Lease) // run (in its own goroutine) when the Lease is lost
}

// Options is the reading of an Acquire call's options, for a backend.
type Options struct {
	// Wait bounds how long Acquire waits for the lock: < 0 until ctx is
	// done (the default), 0 one try.
	Wait time.Duration
	// Lease is the fixed lease; 0 means the lock is kept alive by renewals
	// until Unlock (the watchdog on Redis, a session keepalive elsewhere).
	Lease time.Duration
	// QueueTimeout is how long a waiter's place survives without a sign of
	// life (0: the backend's default).
	QueueTimeout time.Duration
	OnLost       func(*Lease)
}

// ParseOptions reads opts for a backend other than Redis. It returns an
// error wrapping ErrInvalidArgument or ErrInvalidDuration for a bad value,
// and for an option only Redis supports (ReplicaAck, ReplicaAckConnected).
func ParseOptions(opts []Option) (Options, error) {
	cfg, err := newAcquireConfig(opts)
	if err != nil {
		return Options{}, err
	}
	if cfg.replicas != 0 {
		return Options{}, fmt.Errorf("%w: ReplicaAck is a Redis option", ErrInvalidArgument)
	}
	return Options{Wait: cfg.wait, Lease: cfg.lease, QueueTimeout: cfg.queue, OnLost: cfg.onLost}, nil
}

// OwnerOf returns the owner ctx carries (a Lease's Context carries its
// lease's owner, so acquiring a reentrant lock with it re-enters), or a new
// unique id when it carries none.
func OwnerOf(ctx context.Context) string { return ownerOf(ctx) }

// MaxNameLen is the longest lock name accepted, in bytes.
const MaxNameLen = 1024

// CheckName returns an error wrapping ErrInvalidName unless name is a valid
// lock name (1 to MaxNameLen bytes).
func CheckName(name string) error { return validName(name) }

func validName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("%w: %d bytes (want 1..%d)", ErrInvalidName, len(name), MaxNameLen)
	}
	return nil
}
