// Package observe is the observer's page: the events every dlock backend
// (Redis, etcdlock, zklock) reports about its locks, and the interface that
// receives them. Give an Observer to a backend's Config; dlockprom turns the
// events into Prometheus metrics, dlockotel into OpenTelemetry spans and
// metrics.
package observe

import (
	"context"
	"time"
)

// Observer receives lock events, synchronously, from the goroutine that
// caused them: implementations must be fast, safe for concurrent use, and
// must not call back into the lock client (a renewal is reported while the
// hold is locked, so that no renewal is ever reported after its hold
// ended).
//
// Every Lease ends exactly once: by an Unlock that finds it not lost
// (ReleaseEvent with LostBefore false) or by a loss (counted in
// LostEvent.Leases). A Lease lost first and unlocked later yields both
// events, with LostBefore true on the ReleaseEvent.
type Observer interface {
	ObserveAcquire(AcquireEvent)
	ObserveRelease(ReleaseEvent)
	ObserveLost(LostEvent)
	ObserveRenewal(RenewalEvent)
}

// Tracer is an Observer that also brackets every Acquire call. A backend
// whose Observer is a Tracer calls StartAcquire before it sends anything to
// its store, runs the call's store requests under the context it returns
// (so that a traced client library's spans, redisotel's say, nest under the
// acquisition's), and reports the call's end through the returned function
// (instead of ObserveAcquire). The context carries nothing into the lock's
// Lease: work done under Lease.Context is not a child of the acquisition.
type Tracer interface {
	Observer
	StartAcquire(ctx context.Context, shape, name string) (context.Context, func(AcquireEvent))
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
	// LostDeletedOrTaken: the store no longer holds the lock for us
	// (deleted, flushed, expired server-side, or taken by another owner).
	LostDeletedOrTaken LostReason = "deleted_or_taken"
	// LostUnreachable: the lease could not be renewed before it ran out on
	// the client's clock (the store unreachable or paused).
	LostUnreachable LostReason = "unreachable"
	// LostClosed: the lock client was closed while the lease was held.
	LostClosed LostReason = "closed"
	// LostMaxHold: the lease was held for as long as MaxHold allows; it
	// was given up in the store (a stuck worker does not keep a lock for
	// ever).
	LostMaxHold LostReason = "max_hold"
)

// AcquireEvent reports one Acquire call.
type AcquireEvent struct {
	Shape, Name string
	Result      AcquireResult
	Wait        time.Duration // time spent in Acquire
	Token       int64         // the fencing token granted (the first Lease's); 0 unless Result is Acquired
	Err         error         // set when Result is AcquireErr
}

// ReleaseEvent reports one Unlock.
type ReleaseEvent struct {
	Shape, Name string
	Token       int64         // the fencing token of the grant
	Held        time.Duration // since the grant
	Granted     time.Time     // when the hold was granted, on this process's clock (Held ends when the event was made)
	Lease       time.Duration // the fixed lease; 0 when the watchdog kept it
	Renewals    int           // successful watchdog renewals of the hold so far
	FoundLost   bool          // the release found the lock no longer ours
	LostBefore  bool          // the Lease had been lost (and reported) before this Unlock
	Last        bool          // this Unlock ended the hold: no other Lease of its owner holds it
	// Err is the store's error when the release failed (Unlock returned
	// it): the lock stays held in the store until its lease runs out.
	Err error
}

// LostEvent reports a hold lost while held: once per hold, also when an
// Unlock is what found the loss.
type LostEvent struct {
	Shape, Name string
	Token       int64 // the fencing token of the grant
	Reason      LostReason
	Held        time.Duration
	Granted     time.Time     // when the hold was granted, on this process's clock
	Lease       time.Duration // the fixed lease; 0 when the watchdog kept it
	Renewals    int           // successful watchdog renewals of the hold
	Leases      int           // Leases this loss ended (0 when an Unlock found it: that Lease ended by its ReleaseEvent)
}

// RenewalEvent reports one watchdog renewal of a held lock.
type RenewalEvent struct {
	Shape, Name string
	Token       int64 // the fencing token of the grant
	OK          bool
	Held        time.Duration // since the grant
	Renewals    int           // successful renewals of this hold so far
	Err         error         // a transient error (OK false, the lease not lost yet)
}

// Nop is an Observer that does nothing: embed it to observe only some
// events.
type Nop struct{}

func (Nop) ObserveAcquire(AcquireEvent) {}
func (Nop) ObserveRelease(ReleaseEvent) {}
func (Nop) ObserveLost(LostEvent)       {}
func (Nop) ObserveRenewal(RenewalEvent) {}
