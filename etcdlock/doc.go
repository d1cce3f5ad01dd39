// Package etcdlock provides dlock's locks on etcd: the same dlock.Locker
// and *dlock.Lease as the Redis Client (Do, fence, Observer adapters and
// drills work unchanged), on a store that replicates every grant through
// Raft before it answers.
//
// A Client made from a *clientv3.Client (New, with a Config) hands out a
// Mutex, a reentrant Lock, an RWLock, a Semaphore and a MultiLock, reads
// any lock's state with Inspect and lists the held ones with List (for a
// caller that lists again and again, a Lister follows etcd's changes). Each
// holder's key in etcd is attached to the Client's session lease, which
// one keepalive loop renews every TTL/3 (Config.TTL, default 10 s). The
// lease TTL is the lost-lock bound: a holder is told its lock is lost
// (Lease.Context cancelled with ErrLockLost, Done closed) when etcd says
// the session lease is gone, when the key was removed behind its back, and
// when no keepalive was confirmed
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
// Lock-delay. etcd can end a lease while its holder's keepalives are
// confirmed: v3.7.3 revokes leases early after a paused leader resumes (in
// about one round in four of a 3 s pause with etcd's default election
// timeout; docs/RELIABILITY.md has the path and a reproduction against
// etcd alone), and an operator can revoke a lease or delete a key. Without
// more, the next waiter is granted within milliseconds while the old
// holder, told nothing, goes on until its next keepalive or, cut off,
// until its own deadline: etcd's concurrency.Mutex does the same. So every
// hold keeps a mark in etcd (a key without a lease, beside its own; see
// lockdelay.go, which proves the rule sound), and a hold that ends without
// a release holds the lock back from everyone (dlock.LockDelay, Chubby's
// lock-delay) until its holder has been told — its Client deletes the mark
// once the Lease reads as lost, at its next keepalive if it is connected —
// or until the holder's keep (its session's TTL less the election margin,
// its LeaseTime with one) plus the drift allowance has passed since the end
// was seen. An Unlock hands the lock on at once. The price falls on the
// involuntary path only: a holder whose process died delays the next
// grant by its keep more than its lease (1.2 s more at a 2 s TTL). A mark
// is one more key in the acquiring and releasing transactions (the same
// raft entries); dlock.LockDelay(0) writes none and grants as etcd frees.
// Marks of processes that died on names nobody takes again are swept by
// the next Client to start a session (of any name).
//
// A consensus store removes the failover that loses a Redis grant; it does
// not remove the paused client that still believes it holds a lock. Fence
// the storage you write with the token.
package etcdlock
