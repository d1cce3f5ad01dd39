package seam

import (
	"context"

	"github.com/dlockgo/dlock/internal/ids"
)

// Ownership follows the call chain, not the goroutine: every Lease's Context
// carries an owner, and acquiring a reentrant lock with a context that
// carries the owner already holding it re-enters instead of waiting. A
// context with no owner (a fresh one) is a new owner.

type ownerKey struct{}

// carried is what a context carries under ownerKey: the owner, and the
// nearest Lease whose Context it is or is under (nil: none).
type carried struct {
	owner string
	lease *Lease
}

// OwnerOf returns the owner ctx carries (a Lease's Context carries its
// lease's owner, so acquiring a reentrant lock with it re-enters), or a new
// unique id when it carries none.
func OwnerOf(ctx context.Context) string {
	if o := CarriedOwner(ctx); o != "" {
		return o
	}
	return ids.Token()
}

// CarriedOwner returns the owner ctx carries, or "" (a shape whose store
// does not need the owner can leave it to the Lease, which makes one only
// if its Context is asked for).
func CarriedOwner(ctx context.Context) string {
	c, _ := ctx.Value(ownerKey{}).(carried)
	return c.owner
}

// withOwner returns ctx carrying owner as the Context of l (a Lease taken
// under another Lease's Context of the same owner carries itself, so that
// parentOf finds the nearest Lease).
func withOwner(ctx context.Context, owner string, l *Lease) context.Context {
	if c, _ := ctx.Value(ownerKey{}).(carried); c == (carried{owner, l}) {
		return ctx
	}
	return context.WithValue(ctx, ownerKey{}, carried{owner, l})
}

// parentOf returns the context g's Lease hangs under: ctx, the one given to
// Acquire, but for a downgrade (the read side of an RWLock taken under its
// owner's write Lease of the same lock) the one given to the write side's
// Acquire, so that the read hold's Context outlives the write's unlock.
func parentOf(ctx context.Context, g grant) context.Context {
	if g.shape != "rw_read" {
		return ctx
	}
	c, _ := ctx.Value(ownerKey{}).(carried)
	if w := c.lease; w != nil && w.h.g.shape == "rw_write" && w.h.g.name == g.name && c.owner == g.owner {
		return w.parent
	}
	return ctx
}

// NewID returns a new random id (64 bits as 16 hex characters, from the
// runtime's ChaCha8 generator seeded by the operating system: unpredictable
// and unique without a system call), for a backend to tell one holder,
// waiter or attempt apart in its store.
func NewID() string { return ids.Op() }

// ShortID returns the form of a holder's or waiter's id that Inspect shows
// (dlock.Holder.ID, dlock.Waiter.ID): its first 8 characters.
func ShortID(id string) string { return ids.Short(id) }
