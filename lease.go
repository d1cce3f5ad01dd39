package dlock

import "github.com/dlockgo/dlock/seam"

// Lease is the handle of one held lock, whatever its shape or backend (the
// Redis locks of this package, etcdlock, zklock): Token, Context, Done,
// Err, Verify, Extend, Unlock, Name and ID. It is safe for concurrent use,
// and its methods are documented in package seam, where backends make it.
//
// Losing the lock is one fact with three faces: Context is cancelled with
// cause ErrLockLost, Done is closed, and Unlock returns an error wrapping
// ErrLockLost. A lease is lost when its fixed lease runs out on the
// client's clock, when it cannot be renewed before it would run out (the
// store down, paused or cut off), or when the store no longer holds it for
// us (deleted, flushed, expired, taken over). Token is the fencing token:
// strictly greater, for one lock name, than every token granted before it;
// make the storage reject writes with a lower one (package fence).
type Lease = seam.Lease
