// Package ids makes the random ids of locks: holder tokens, owners and
// operation ids.
package ids

import "math/rand/v2"

// Token returns 128 random bits as 32 hex characters (one allocation).
// The bits come from the runtime's per-thread ChaCha8 generator, seeded by
// the operating system: unpredictable and unique without a system call.
func Token() string {
	var b [32]byte
	return string(AppendToken(b[:0]))
}

// AppendToken appends a new token (see Token) to b.
func AppendToken(b []byte) []byte {
	n := len(b)
	b = append(b, make([]byte, 32)...)
	putHex(b[n:n+16], rand.Uint64())
	putHex(b[n+16:], rand.Uint64())
	return b
}

// Op returns an id for one operation (64 random bits, 16 hex characters),
// so that a retried command that was already applied is recognised and
// not applied twice.
func Op() string {
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

// Short returns the first 8 characters of id (what Inspect shows).
func Short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
