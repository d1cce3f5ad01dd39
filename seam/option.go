package seam

import (
	"fmt"
	"time"
)

// Option configures one acquisition; package dlock documents each (Wait,
// LeaseTime, QueueTimeout, ReplicaAck, ReplicaAckConnected, OnLost,
// MaxHold, LockDelay). An
// Option is a small value: building one allocates nothing, and an invalid
// one (a negative wait, say) is reported by the Acquire it is given to.
// The zero Option changes nothing.
type Option struct {
	kind optionKind
	d    time.Duration
	n    int
	f    func(*Lease)
}

type optionKind uint8

const (
	optNone optionKind = iota
	optWait
	optLease
	optReplicaAck
	optReplicaAckConnected
	optOnLost
	optQueueTimeout
	optMaxHold
	optLockDelay
)

// The options' constructors; package dlock re-exports them with their
// documentation.

func Wait(d time.Duration) Option         { return Option{kind: optWait, d: d} }
func LeaseTime(d time.Duration) Option    { return Option{kind: optLease, d: d} }
func QueueTimeout(d time.Duration) Option { return Option{kind: optQueueTimeout, d: d} }
func OnLost(f func(*Lease)) Option        { return Option{kind: optOnLost, f: f} }
func MaxHold(d time.Duration) Option      { return Option{kind: optMaxHold, d: d} }
func LockDelay(d time.Duration) Option    { return Option{kind: optLockDelay, d: d} }
func ReplicaAck(n int, timeout time.Duration) Option {
	return Option{kind: optReplicaAck, n: n, d: timeout}
}
func ReplicaAckConnected(timeout time.Duration) Option {
	return Option{kind: optReplicaAckConnected, d: timeout}
}

// Options is the reading of an Acquire call's options.
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
	// Replicas and ReplicaWait are ReplicaAck's (Replicas < 0: as many as
	// are connected), a Redis option: a backend without replicas to wait
	// for refuses them (see Portable).
	Replicas    int
	ReplicaWait time.Duration
	// MaxHold caps how long the lease may be held, renewals and Extends
	// included (0: no cap); pass it on as Grant.MaxHold.
	MaxHold time.Duration
	// LockDelay is how long the lock stays refused to everyone after this
	// hold ends without a release (0: not at all); < 0 when not given: the
	// backend's default. A backend without a lock-delay refuses a positive
	// one (see NoLockDelay).
	LockDelay time.Duration
}

// ParseOptions reads opts. It returns an error wrapping ErrInvalidArgument
// or ErrInvalidDuration for a bad value.
func ParseOptions(opts []Option) (Options, error) {
	o := Options{Wait: -1, LockDelay: -1}
	for _, opt := range opts {
		if err := o.apply(opt); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Portable returns an error wrapping ErrInvalidArgument if o asks for an
// option only Redis supports (ReplicaAck, ReplicaAckConnected).
func (o Options) Portable() error {
	if o.Replicas != 0 {
		return fmt.Errorf("%w: ReplicaAck is a Redis option", ErrInvalidArgument)
	}
	return nil
}

// NoLockDelay returns an error wrapping ErrInvalidArgument if o asks for
// a lock-delay (LockDelay(d), d > 0), for a backend that has none (backend:
// its name in the error).
func (o Options) NoLockDelay(backend string) error {
	if o.LockDelay > 0 {
		return fmt.Errorf("%w: LockDelay is not supported on %s (it never holds a lock back after a holder was lost)", ErrInvalidArgument, backend)
	}
	return nil
}

// apply reads one option into o, or returns why it is invalid.
func (o *Options) apply(opt Option) error {
	switch opt.kind {
	case optWait:
		if opt.d < 0 {
			return fmt.Errorf("%w: wait %v", ErrInvalidDuration, opt.d)
		}
		o.Wait = opt.d
	case optLease:
		if opt.d < time.Millisecond {
			return fmt.Errorf("%w: lease %v (want >= 1ms)", ErrInvalidDuration, opt.d)
		}
		o.Lease = opt.d
	case optReplicaAck:
		if opt.n < 1 {
			return fmt.Errorf("%w: replica count %d (want >= 1)", ErrInvalidArgument, opt.n)
		}
		if opt.d <= 0 {
			return fmt.Errorf("%w: replica ack timeout %v", ErrInvalidDuration, opt.d)
		}
		o.Replicas, o.ReplicaWait = opt.n, opt.d
	case optReplicaAckConnected:
		if opt.d <= 0 {
			return fmt.Errorf("%w: replica ack timeout %v", ErrInvalidDuration, opt.d)
		}
		o.Replicas, o.ReplicaWait = -1, opt.d
	case optOnLost:
		if opt.f == nil {
			return fmt.Errorf("%w: nil OnLost function", ErrInvalidArgument)
		}
		o.OnLost = opt.f
	case optQueueTimeout:
		if opt.d < 30*time.Millisecond {
			return fmt.Errorf("%w: queue timeout %v (want >= 30ms)", ErrInvalidDuration, opt.d)
		}
		o.QueueTimeout = opt.d
	case optMaxHold:
		if opt.d < time.Millisecond {
			return fmt.Errorf("%w: max hold %v (want >= 1ms)", ErrInvalidDuration, opt.d)
		}
		o.MaxHold = opt.d
	case optLockDelay:
		if opt.d < 0 {
			return fmt.Errorf("%w: lock delay %v (want >= 0)", ErrInvalidDuration, opt.d)
		}
		o.LockDelay = opt.d
	}
	return nil
}
