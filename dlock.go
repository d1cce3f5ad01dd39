// Package dlock provides distributed locks on Redis that tell you when you
// lost them.
//
// A Client wraps a go-redis client (standalone, Sentinel failover or Cluster)
// and hands out locks of several shapes (Mutex, the reentrant Lock, ...), all
// acquired through Locker.Acquire and all returning a *Lease. The Lease
// carries a fencing token, a Context that is cancelled when the lock is lost,
// and Verify, Extend and Unlock. Do runs a function under a lock and never
// lets a lost lock look like a success.
//
// A lock on Redis lowers the odds of a conflict; it cannot rule one out
// (processes pause, clocks jump, failovers lose writes). Make the storage
// check the fencing token (package fence) where a conflict must never
// commit.
//
// # One contract, four lock services
//
// This package's Client (Redis), etcdlock, zklock and dlockfake (in
// memory, for tests) hand out the same Lockers and the same *Lease, take
// the same Options and name their settings alike (Config.Prefix where the
// locks live, Config.TTL how long the store keeps a client's locks past its
// last sign of life, Client.TTL to read it back); package dlocktest checks
// every one of them the same way. Where a store cannot do what another
// does, this is what differs:
//
//	                Redis                etcd                  ZooKeeper              dlockfake
//	Mutex, Lock     a free lock goes to  arrival order         arrival order          arrival order
//	                whoever asks; a
//	                release hands it to
//	                the first waiter
//	FairLock        arrival order        arrival order         arrival order          arrival order
//	Semaphore       any order            arrival order         arrival order          arrival order
//	QueueTimeout(d) d >= 30 ms           d rounded up to whole d >= the session TTL   any d
//	                                     seconds (>= etcd's    (a shorter d is
//	                                     minimum lease TTL)    refused)
//	ReplicaAck      yes                  refused (consensus)   refused (consensus)    refused
//	LockDelay(d)    refused (d > 0)      yes; default: the     refused (d > 0)        any d (it tells a
//	                                     lost holder's keep                           holder before it
//	                                                                                  frees its lock)
//	tokens          clock and a counter  create revision       czxid                  one counter
//	                per hash slot
//	MultiLock       one script, or slot  one transaction;      one transaction;       one step
//	                by slot with         waits in arrival      waits in arrival
//	                rollback             order                 order
//
// # Errors
//
// Every error of dlock, of its backends and of its companion packages
// (election, fence, dlockprom, dlockotel) is one line that starts with
// "dlock: " once and names the call that failed once, then the reason,
// with each cause once. A call on one lock names the lock's shape and its
// name:
//
//	dlock: acquire mutex "stock:1": not acquired
//	dlock: unlock mutex "stock:1": lock lost (expired)
//	dlock: inspect "stock:1": key holds the wrong type: a key of no lock shape
//
// (the shape is left out by a call that does not know it: Inspect, Do,
// election's Lead). A lost lock's own error (Lease.Err, the Context's
// cause) names the call "hold"; Unlock, Extend and Verify report the same
// loss under their own name. A call on no one lock names itself and what
// it is on, if anything:
//
//	dlock: new client: invalid duration: TTL 1ms (want >= 3ms)
//	dlock: dial zookeeper "127.0.0.1:1": context deadline exceeded (no session established)
//	dlock: fence update "stock": stale token 33 (already saw 34)
//
// Each wraps the sentinel of its meaning (below) and the store's or ctx's
// error: test with errors.Is, never the text.
package dlock
