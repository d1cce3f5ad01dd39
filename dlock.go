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
package dlock
