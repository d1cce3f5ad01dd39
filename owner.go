package dlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// Ownership follows the call chain, not the goroutine: every Lease's Context
// carries an owner, and acquiring a reentrant Lock with a context that carries
// the owner already holding it re-enters instead of waiting. A context with no
// owner (a fresh one) is a new owner.

type ownerKey struct{}

// ownerOf returns the owner carried by ctx, or a new one.
func ownerOf(ctx context.Context) string {
	if o, ok := ctx.Value(ownerKey{}).(string); ok {
		return o
	}
	return newToken()
}

func withOwner(ctx context.Context, owner string) context.Context {
	if o, ok := ctx.Value(ownerKey{}).(string); ok && o == owner {
		return ctx
	}
	return context.WithValue(ctx, ownerKey{}, owner)
}

// newToken returns 128 random bits as 32 hex characters.
func newToken() string { return randomHex(16) }

// newOpID returns an id for one operation, so that a retried command that was
// already applied is recognised and not applied twice.
func newOpID() string { return randomHex(8) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error (Go 1.24+)
	return hex.EncodeToString(b)
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
