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
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

func withOwner(ctx context.Context, owner string) context.Context {
	if CarriedOwner(ctx) == owner {
		return ctx
	}
	return context.WithValue(ctx, ownerKey{}, owner)
}
