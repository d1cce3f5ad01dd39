// Package etcdlock provides dlock's locks on etcd: the same dlock.Locker
// and *dlock.Lease as the Redis Client (Do, fence, Observer adapters and
// drills work unchanged), on a store that replicates every grant through
// Raft before it answers.
//
// A Client made from a *clientv3.Client (New, with a Config) hands out a
// Mutex, a reentrant Lock, an RWLock, a Semaphore and a MultiLock, and
// reads any lock's state with Inspect. Each holder's key in etcd is
// attached to the Client's session lease, which one keepalive loop renews
// every TTL/3 (Config.TTL, default 10 s). The lease TTL is the lost-lock
// bound: a holder is told its lock is lost (Lease.Context cancelled with
// ErrLockLost, Done closed) when etcd says the session lease is gone, when
// the key was removed behind its back, and when no keepalive was confirmed
// for a TTL on the client's own monotonic clock, less the election margin
// (2/5 of the cluster's minimum lease TTL, which the Client learns once:
// 800 ms with etcd's default election timeout; see margin.go) and a small
// drift allowance — before the cluster can expire the lease and grant the
// lock to anyone else, also when the holder's member is a leader cut off
// from its followers, which goes on confirming keepalives until it steps
// down.
// LeaseTime(d) gives a grant a lease of its own that nothing renews;
// MaxHold(d) caps how long a grant may be held.
//
// Waiters queue by the create revision of their key (arrival order); each
// waits only for the key in front of it (no thundering herd), gives its
// place up when it stops waiting, and is passed over when its process dies
// (its lease expires). A waiter whose own key disappears (its session
// ended) notices at once and queues again behind everyone. A waiter's
// place lives as long as its session; with QueueTimeout(d) shorter than
// the session TTL it lives d past the waiter's last sign of life (see
// queuelease.go): a waiter that goes silent stops blocking the others
// after at most d.
//
// Uncontended, an acquisition is one request to etcd and its release one
// more (the same as etcd's own concurrency.Mutex); re-entries cost none.
// Lease.ID is the holder's key in etcd.
//
// The fencing token is the create revision of the holder's key: strictly
// increasing across every lock of the cluster and across leader changes.
// IsOwner returns it as a comparison for the caller's own etcd transactions.
//
// A consensus store removes the failover that loses a Redis grant; it does
// not remove the paused client that still believes it holds a lock. Fence
// the storage you write with the token.
package etcdlock
