package seam

import (
	"context"
	"time"
)

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
	// ReleasedStillHeld: a reentrant count kept by the store went down; the
	// owner still holds the lock through another Lease.
	ReleasedStillHeld Released = 2
)

// Grant is one lock a backend granted to one owner, as handed to
// Keeper.Lease; O is the backend's own type of GrantOps, which the Keeper
// gives back through Hold.Ops.
type Grant[O GrantOps] struct {
	Shape string // the lock's shape, for events and errors: "mutex", "lock", ...
	Name  string // the lock's name
	// Key joins this grant to a live hold with the same Key (a reentrant
	// re-entry by the same owner): the new Lease shares that hold, and
	// Ops is not used. "" never joins.
	Key string
	// StoreCounts says the store counts the re-entries of a reentrant hold
	// (Redis: a hold count in the lock's hash), so every Lease's Unlock
	// calls Release; otherwise the Keeper counts them (see Keeper.Join)
	// and only the last Lease's Unlock does.
	StoreCounts bool
	Owner       string // the owner the Lease's Context carries (see OwnerOf); "": made when asked for
	ID          string // Lease.ID: the holder id in the store
	Token       int64  // the fencing token
	// Sent is when the request that granted the lock was sent, and TTL how
	// long from then the store keeps the grant without a renewal: the Lease
	// is lost on the client's monotonic clock at Sent + TTL - Drift(TTL).
	Sent time.Time
	TTL  time.Duration
	// Renewed marks a grant the backend keeps alive with renewals (a
	// watchdog's, or a session keepalive's): missing its deadline is
	// LostUnreachable rather than LostExpired, and Keeper.Renewing lists it.
	Renewed bool
	// Session, if not nil, is the renewal the grant's life depends on: every
	// hold of one Session is renewed by Keeper.RenewSession and lost by
	// Keeper.LoseSession (an etcd lease, a ZooKeeper session). Comparable.
	Session any
	// Lease is the lease asked for when TTL is a shorter first grant (a
	// Redis hand-off): the Keeper extends the grant to Lease when two thirds
	// of TTL have passed, unless it was extended or renewed before. 0: TTL.
	Lease time.Duration
	// MaxHold, if not 0, caps how long the hold may live from its grant,
	// renewals and extensions included: at the cap it is lost
	// (observe.LostMaxHold) and released in the store (Options.MaxHold).
	MaxHold time.Duration
	Ops     O
	OnLost  func(*Lease) // run (in its own goroutine, which Keeper.Close waits for) when the Lease is lost
}

// grant is a Grant as the Keeper keeps it.
type grant struct {
	shape, name, key, owner, id string
	storeCounts, renewed        bool
	token                       int64
	sent                        time.Time
	ttl, lease, maxHold         time.Duration
	session                     any
	ops                         GrantOps
	onLost                      func(*Lease)
}

func (g Grant[O]) kept() grant {
	return grant{shape: g.Shape, name: g.Name, key: g.Key, owner: g.Owner, id: g.ID, storeCounts: g.StoreCounts, renewed: g.Renewed,
		token: g.Token, sent: g.Sent, ttl: g.TTL, lease: g.Lease, maxHold: g.MaxHold, session: g.Session, ops: g.Ops, onLost: g.OnLost}
}
