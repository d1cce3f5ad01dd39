// Package dlockotel records the locks of every dlock backend (Redis,
// etcdlock, zklock) as OpenTelemetry spans and metrics. It depends on the
// OpenTelemetry API only; the program brings the SDK and its exporters.
//
//	obs, err := dlockotel.New(dlockotel.WithBackend("redis")) // the global providers
//	client, err := dlock.New(rdb, dlock.Config{Observer: obs})
//
// # Spans
//
// dlock.acquire: one per Acquire call, a child of the caller's span (the
// ctx given to Acquire), from the call to its return. Its attributes:
// dlock.lock.shape (mutex, lock, fair, rw_read, ...), dlock.backend (when
// WithBackend names it), dlock.acquire.result (acquired, not_acquired,
// error), dlock.acquire.wait (seconds in the call), dlock.lock.token (the
// fencing token granted, when acquired), and on error
// error.type (closed, invalid_argument, canceled, deadline_exceeded, ...,
// or _OTHER: a store error) with error status and the error's text as its
// description. A refusal (not_acquired: the lock was busy for the whole
// wait) is not an error. The backend runs the call's store requests under
// the span's context: with redisotel on the go-redis client, the EVALSHAs
// of an acquisition (the first attempt, the retries while it waits) are
// children of its span when the go-redis client has ContextTimeoutEnabled
// (without it, dlock sends the calls made under a ctx deadline through a
// copy of the client that runs none of its hooks: see dlock.New). Work done under Lease.Context is not: the Lease
// keeps the caller's context.
//
// dlock.hold: one per hold (one grant, shared by an owner's reentrant
// Leases), from the grant to the Unlock that ends it or to its loss, with
// dlock.lock.shape, dlock.backend, dlock.lock.token (the fencing token),
// dlock.hold.renewals (successful watchdog renewals) and dlock.hold.lease
// (the fixed lease in seconds; absent for a watchdog lease). A hold that
// was lost ends at the loss, with error status "lock lost (REASON)" and a
// dlock.hold.lost event carrying dlock.loss.reason: expired, deleted_or_taken,
// unreachable, closed or max_hold. A loss found by Unlock ends the span at
// that Unlock; an Unlock after the loss adds nothing to it.
//
// The hold span is made when the hold ends, with the grant's time as its
// start: a hold costs no span, and no memory, while it is held (holds can
// last hours, and an SDK exports a span only when it ends anyway). It is
// a root span of a trace of its own: the events that end a hold carry no
// context (an Unlock's ctx is not reported); the acquire span and the hold
// span both carry dlock.lock.token, which matches one with the other. A
// hold that never
// ends (the process dies) is never recorded.
//
// # Metrics
//
// Every metric carries dlock.lock.shape, dlock.backend (with WithBackend)
// and dlock.lock.group (with WithGroup): bounded attributes only.
//
//	dlock.acquire.duration        histogram  s         Acquire calls by dlock.acquire.result (and error.type): their count is the acquisitions by result
//	dlock.hold.duration           histogram  s         grant to Unlock, at every Unlock (also one that found the lock lost)
//	dlock.hold.lease_utilization  histogram  1         hold time / fixed lease, at Unlock of a fixed lease
//	dlock.lost_holds              counter    {hold}    holds lost, by dlock.loss.reason: any is an incident
//	dlock.lost_unlocks            counter    {unlock}  Unlocks that found the lock no longer ours
//	dlock.release_failures        counter    {unlock}  Unlocks whose release failed (store error, timeout)
//	dlock.renewals                counter    {renewal} watchdog renewals, by dlock.renewal.result (renewed, failed)
//	dlock.renewals_per_lease      histogram  {renewal} renewals of a watchdog Lease, when it ends
//	dlock.slow_holds              counter    {hold}    holds past the slow-hold threshold (WithSlowHold), once each
//
// These are dlockprom's metrics, one for one, except two: the acquisition
// counter is the count of dlock.acquire.duration (which times every call,
// not only the successful ones: filter on dlock.acquire.result), and
// dlockprom's held-leases gauge has no counterpart here (an AcquireN of k
// permits reports one acquisition and k releases, so the gauge cannot be
// kept right from the events). The counters of losses, lost unlocks and
// slow holds start at 0 when a label set is first seen, so that an alert on
// their increase sees the first one.
//
// # Lock names
//
// No span or metric carries the lock name, or anything derived from it,
// unless the user says so: names are unbounded (one per order id) and may
// be personal. WithLockNames records it on spans (dlock.lock.name), never
// on metrics; WithGroup records a bounded label of it (dlock.lock.group,
// at most WithMaxGroups distinct values) on spans and metrics. The hold
// state the Observer keeps (slow holds only) is keyed by shape, name and
// token in memory; it is never recorded.
//
// # Cost
//
// The Observer is called synchronously from the lock's goroutine. The
// events of one Acquire and Unlock (BenchmarkEvents, no store) cost about
// 0.5 µs and 5 allocations with OTel's no-op providers (a program that
// never set OTel up), and about 8 µs and 19 allocations with the SDK, both
// spans sampled and the metrics aggregated, most of it the SDK's. An
// Acquire and Unlock of a Mutex on a local redis-server takes about 75 µs
// (BenchmarkAcquireUnlock). A span that is not sampled gets no attributes
// beyond those it starts with; the labels of each (shape, group) pair are
// made once.
package dlockotel
