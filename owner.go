package dlock

import (
	"context"
	"math/rand/v2"
)

// Ownership follows the call chain, not the goroutine: every Lease's Context
// carries an owner, and acquiring a reentrant Lock with a context that carries
// the owner already holding it re-enters instead of waiting. A context with no
// owner (a fresh one) is a new owner.

type ownerKey struct{}

// ownerOf returns the owner carried by ctx, or a new one.
func ownerOf(ctx context.Context) string {
	if o := carriedOwner(ctx); o != "" {
		return o
	}
	return newToken()
}

// carriedOwner returns the owner ctx carries, or "".
func carriedOwner(ctx context.Context) string {
	o, _ := ctx.Value(ownerKey{}).(string)
	return o
}

func withOwner(ctx context.Context, owner string) context.Context {
	if carriedOwner(ctx) == owner {
		return ctx
	}
	return context.WithValue(ctx, ownerKey{}, owner)
}

// newToken returns 128 random bits as 32 hex characters (one allocation).
// The bits come from the runtime's per-thread ChaCha8 generator, seeded by
// the operating system: unpredictable and unique without a system call.
func newToken() string {
	var b [32]byte
	return string(appendToken(b[:0]))
}

// appendToken appends a new token (see newToken) to b.
func appendToken(b []byte) []byte {
	n := len(b)
	b = append(b, make([]byte, 32)...)
	putHex(b[n:n+16], rand.Uint64())
	putHex(b[n+16:], rand.Uint64())
	return b
}

// newOpID returns an id for one operation (64 random bits, 16 hex
// characters), so that a retried command that was already applied is
// recognised and not applied twice.
func newOpID() string {
	var b [16]byte
	putHex(b[:], rand.Uint64())
	return string(b[:])
}

// putHex writes v as 16 lowercase hex digits into b.
func putHex(b []byte, v uint64) {
	const digits = "0123456789abcdef"
	for i := 15; i >= 0; i-- {
		b[i] = digits[v&0xf]
		v >>= 4
	}
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
