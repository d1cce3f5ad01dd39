package dlock

import (
	"time"

	"github.com/dlockgo/dlock/seam"
)

// Option configures one acquisition.
//
//	option            meaning                                   default
//	Wait(d)           how long to try: 0 = try once             until ctx is done
//	LeaseTime(d)      fixed lease, no watchdog                  watchdog keeps it
//	ReplicaAck(n, t)  n replicas must acknowledge within t      no
//	OnLost(f)         f runs once when the lease is lost         none
//	QueueTimeout(d)   queued waiter (Mutex, Lock, FairLock,    5 s
//	                  RWLock writer) that goes silent loses
//	                  its place after d
//	MaxHold(d)        the lease is lost and released d after    no cap
//	                  the grant, however it is kept
//	LockDelay(d)      after a hold ends without a release,      etcd: the lost
//	                  nobody else is granted the lock for d     holder's lease;
//	                  (etcd only; 0: at once)                   elsewhere none
//
// Wait and lease are different things: the wait bounds how long Acquire
// blocks; the lease bounds how long the lock stays ours if we stop renewing
// it. An Option is a small value: building one allocates nothing, and an
// invalid one (a negative wait, say) is reported by the Acquire it is given
// to. The zero Option changes nothing. Every backend takes the same
// options (ReplicaAck is Redis's alone).
type Option = seam.Option

// Wait bounds how long Acquire tries: 0 tries once; d > 0 tries for up to d.
// Without Wait, Acquire waits until ctx is done. A negative d is an error.
func Wait(d time.Duration) Option { return seam.Wait(d) }

// LeaseTime gives the lock a fixed lease d (at least 1 ms): no watchdog renews it,
// and when d runs out the lease is lost (Context cancelled, Done closed) unless
// Extend was called in time. Without LeaseTime, the Client's watchdog keeps the
// lock for as long as it is held.
func LeaseTime(d time.Duration) Option { return seam.LeaseTime(d) }

// ReplicaAck makes an acquisition count only once n replicas have
// acknowledged it within timeout (Redis WAIT on the same connection as the
// grant). Fewer acknowledgements, or fewer than n replicas connected to the
// master at all, undo the acquisition and return ErrNotReplicated at once, so
// an under-replicated master fails fast instead of costing a WAIT timeout per
// attempt (right after a failover of a one-replica setup the new master has
// no replica at all: with n = 1 every acquisition then fails; use
// ReplicaAckConnected to accept that).
//
// WAIT narrows the failover window; it does not close it: Redis replication
// stays asynchronous, a replica that acknowledged can still lose the write,
// and Sentinel may promote a replica that did not acknowledge. Surviving the
// failover of one replica with ReplicaAck needs at least two replicas. For
// correctness under failover use fencing tokens checked by the storage.
//
// The WAIT runs in a pipeline, so keep timeout below the go-redis client's
// ReadTimeout.
func ReplicaAck(n int, timeout time.Duration) Option { return seam.ReplicaAck(n, timeout) }

// ReplicaAckConnected is ReplicaAck with n = the number of replicas connected
// to the master when the lock is granted (0 replicas: no wait at all).
func ReplicaAckConnected(timeout time.Duration) Option { return seam.ReplicaAckConnected(timeout) }

// OnLost registers f to run once, in its own goroutine, when the lease is
// lost (not when it is released). The Client's Close waits for it, within
// its bound.
func OnLost(f func(*Lease)) Option {
	if f == nil {
		return seam.OnLost(nil) // refused by the Acquire it is given to
	}
	return seam.OnLost(func(l *seam.Lease) { f((*Lease)(l)) })
}

// MaxHold caps how long the lock may be held, whatever keeps it (the
// watchdog, Extend): d after the grant the lease is lost, with cause
// ErrLockLost (max_hold) and observe.LostMaxHold in the events, and the
// lock is released in the store so that others can have it. A worker stuck
// inside its critical section keeps the lock for at most d (without a
// cap, the watchdog keeps a stuck worker's lock for ever). At least 1 ms.
// A Lock that its owner re-entered is released once in Redis at the cap
// (one of its holds): the rest of it, renewed no more, ends with its lease
// (the watchdog timeout at most).
func MaxHold(d time.Duration) Option { return seam.MaxHold(d) }

// LockDelay sets the lock-delay of this acquisition's hold (Chubby's): if
// the hold ends without a release — the lock service ended it early (etcd
// revokes leases early after a paused leader resumes; an operator revoked
// the lease or deleted the key), or the holder's process died — the lock
// is granted to nobody else until d after the end was seen, or until the
// lost holder has been told (its Err, Done and Context say ErrLockLost),
// whichever comes first. An Unlock hands the lock on at once. d = 0 turns
// it off (the next waiter is granted as soon as the store frees the lock).
//
// On etcd the default, without LockDelay, is as long as the lost holder
// may still believe it holds: its session's TTL less the election margin
// (its LeaseTime with one), plus the drift allowance. So a holder that
// was cut off or paused when etcd ended its lease is past its own
// deadline before anyone else gets in, and a holder whose process died
// delays the next grant by that much more than its lease. Redis and
// ZooKeeper have no lock-delay (see docs/RELIABILITY.md, "When the
// service ends a hold early"): they refuse d > 0 with ErrInvalidArgument.
func LockDelay(d time.Duration) Option { return seam.LockDelay(d) }

// defaultQueueTimeout is how long a queued waiter keeps its place without
// refreshing it, unless QueueTimeout says otherwise.
const defaultQueueTimeout = 5 * time.Second

// QueueTimeout sets how long a waiter of a Mutex, Lock or FairLock, or a
// writer waiting on an RWLock, keeps its place without refreshing it (at
// least 30 ms; default 5 s). A waiting Acquire refreshes
// its place every d/3, so a live waiter never loses it; a waiter whose
// process died blocks the queue for at most d (a lock handed to it is
// granted for at most what was left of d).
func QueueTimeout(d time.Duration) Option { return seam.QueueTimeout(d) }
