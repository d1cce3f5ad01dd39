package dlock

import "time"

// Observer receives lock events, synchronously, from the goroutine that
// caused them: implementations must be fast and safe for concurrent use.
// The Prometheus adapter lives in package dlockprom.
type Observer interface {
	ObserveAcquire(AcquireEvent)
	ObserveRelease(ReleaseEvent)
	ObserveLost(LostEvent)
	ObserveRenewal(RenewalEvent)
}

// AcquireResult is the outcome of one Acquire call.
type AcquireResult string

// The outcomes of Acquire.
const (
	Acquired    AcquireResult = "acquired"
	NotAcquired AcquireResult = "not_acquired"
	AcquireErr  AcquireResult = "error"
)

// LostReason says why a lease was lost.
type LostReason string

// The reasons a lease is lost.
const (
	// LostExpired: a fixed lease ran out on the client's clock.
	LostExpired LostReason = "expired"
	// LostDeletedOrTaken: Redis no longer holds the lock for us (deleted,
	// flushed, expired server-side, or taken by another owner).
	LostDeletedOrTaken LostReason = "deleted_or_taken"
	// LostUnreachable: the watchdog could not renew the lease before it ran
	// out on the client's clock (Redis unreachable or paused).
	LostUnreachable LostReason = "unreachable"
	// LostClosed: the Client was closed while the lease was held.
	LostClosed LostReason = "closed"
)

// AcquireEvent reports one Acquire call.
type AcquireEvent struct {
	Shape, Name string
	Result      AcquireResult
	Wait        time.Duration // time spent in Acquire
	Err         error         // set when Result is AcquireErr
}

// ReleaseEvent reports one Unlock.
type ReleaseEvent struct {
	Shape, Name string
	Held        time.Duration // since the grant
	Lease       time.Duration // the fixed lease; 0 when the watchdog kept it
	FoundLost   bool          // the release found the lock no longer ours
}

// LostEvent reports a lease lost while held.
type LostEvent struct {
	Shape, Name string
	Reason      LostReason
	Held        time.Duration
}

// RenewalEvent reports one watchdog renewal of a held lock.
type RenewalEvent struct {
	Shape, Name string
	OK          bool
	Held        time.Duration // since the grant
	Renewals    int           // successful renewals of this hold so far
	Err         error         // a transient error (OK false, the lease not lost yet)
}

type nopObserver struct{}

func (nopObserver) ObserveAcquire(AcquireEvent) {}
func (nopObserver) ObserveRelease(ReleaseEvent) {}
func (nopObserver) ObserveLost(LostEvent)       {}
func (nopObserver) ObserveRenewal(RenewalEvent) {}
