// Package dlockfake is a lock service in memory for the tests of code that
// uses dlock: the same dlock.Locker and *dlock.Lease as Redis, etcd and
// ZooKeeper, on a clock the test moves, with the failures of a lock
// service injected on cue — so that the code that handles a lost lock (roll
// back, reconcile, stop writing, campaign again) is tested in
// milliseconds, the same way on every run, without a server.
//
// A Service is the lock service; each Client of it is one process's
// client, with every shape of the real backends (Mutex, Lock, FairLock,
// RWLock, Semaphore, MultiLock), fencing tokens, Inspect, and a
// seam.Keeper that keeps its holds as etcdlock's and zklock's do: Do,
// MaxHold, OnLost, the Observer's events and the lost-lock signal are the
// library's own, not a copy. It passes dlocktest, the suite every backend
// passes. A Client starts no goroutine: its renewals and deadlines are
// timers on the Service's clock.
//
// The clock stands still (New) until the test calls Advance; then the
// deadlines, renewals and waits that fall due happen in order, each at
// its time, before Advance returns. The faults:
//
//   - Lose: a held lock lost now, for a reason (expired, deleted or
//     taken, unreachable); its holder is told.
//   - Take: another process takes the lock now; the holder, if any, is
//     not told and finds out at its next renewal, Verify, Extend or
//     Unlock; the code under test waits, or gets dlock.ErrNotAcquired.
//   - FailRenewals: the next renewals fail; the holder loses its lease at
//     its deadline, as on Redis.
//   - FailAcquires, BlockAcquires, DelayGrants: acquisitions fail with a
//     store error, get no answer, or are granted late.
//   - Client.Pause and Resume: a process stopped (a GC pause, SIGSTOP)
//     while its leases run out and another process is granted its locks.
//
// Record lists what the Clients did — acquisitions with their tokens,
// releases, Verify and Extend calls, renewals, losses — to assert on, and
// AwaitWaiters lets a test move the clock only once the code under test
// waits on it. docs/TESTING.md shows a whole test.
package dlockfake
