package dlockotel

import (
	"sync"

	"github.com/dlockgo/dlock/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// maxValueLen caps an attribute value made from a lock's data, in bytes.
const maxValueLen = 64

// The attribute keys.
const (
	keyBackend       = attribute.Key("dlock.backend")
	keyShape         = attribute.Key("dlock.lock.shape")
	keyGroup         = attribute.Key("dlock.lock.group")
	keyName          = attribute.Key("dlock.lock.name")
	keyToken         = attribute.Key("dlock.lock.token")
	keyResult        = attribute.Key("dlock.acquire.result")
	keyWait          = attribute.Key("dlock.acquire.wait")
	keyErrorType     = attribute.Key("error.type")
	keyLossReason    = attribute.Key("dlock.loss.reason")
	keyRenewalResult = attribute.Key("dlock.renewal.result")
	keyHoldRenewals  = attribute.Key("dlock.hold.renewals")
	keyHoldLease     = attribute.Key("dlock.hold.lease")
)

// The values of dlock.renewal.result.
const (
	renewalRenewed = "renewed"
	renewalFailed  = "failed"
)

// Bucket boundaries of the histograms (dlockprom's).
var (
	waitBuckets     = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	holdBuckets     = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	ratioBuckets    = []float64{.1, .25, .5, .6, .7, .75, .8, .85, .9, .95, 1, 1.25, 1.5, 2, 5}
	renewalsBuckets = []float64{0, 1, 2, 3, 5, 10, 20, 50, 100, 300, 1000}
)

// lostReasons are the LostReasons whose counters exist from a label set's
// first event on (at 0): an alert on increase() then sees the first loss.
var lostReasons = []observe.LostReason{observe.LostExpired, observe.LostDeletedOrTaken, observe.LostUnreachable, observe.LostClosed, observe.LostMaxHold}

// instruments are the Observer's metrics.
type instruments struct {
	acquire     metric.Float64Histogram // dlock.acquire.duration
	hold        metric.Float64Histogram // dlock.hold.duration
	utilization metric.Float64Histogram // dlock.hold.lease_utilization
	lost        metric.Int64Counter     // dlock.lost_holds
	lostUnlocks metric.Int64Counter     // dlock.lost_unlocks
	failedRel   metric.Int64Counter     // dlock.release_failures
	renewals    metric.Int64Counter     // dlock.renewals
	perLease    metric.Int64Histogram   // dlock.renewals_per_lease
	slowHolds   metric.Int64Counter     // dlock.slow_holds
}

func newInstruments(m metric.Meter) (instruments, error) {
	var ins instruments
	var errs []error
	hist := func(name, unit, desc string, buckets []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc), metric.WithExplicitBucketBoundaries(buckets...))
		errs = append(errs, err)
		return h
	}
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	ins.acquire = hist("dlock.acquire.duration", "s", "Time Acquire calls took, waiting included, by dlock.acquire.result.", waitBuckets)
	ins.hold = hist("dlock.hold.duration", "s", "Time from grant to Unlock, at every Unlock (also one that found the lock lost).", holdBuckets)
	ins.utilization = hist("dlock.hold.lease_utilization", "1",
		"Hold time divided by the fixed lease, at Unlock of a fixed lease; a P99 near 1 means the lease is too short.", ratioBuckets)
	ins.lost = counter("dlock.lost_holds", "{hold}", "Holds lost while held, by dlock.loss.reason: any is an incident.")
	ins.lostUnlocks = counter("dlock.lost_unlocks", "{unlock}", "Unlocks that found the lock no longer ours: the section ran without exclusivity.")
	ins.failedRel = counter("dlock.release_failures", "{unlock}", "Unlocks whose release failed (store error or timeout): the lock may stay held until its lease runs out.")
	ins.renewals = counter("dlock.renewals", "{renewal}", "Watchdog renewals, by dlock.renewal.result (renewed, failed: not yet a loss).")
	perLease, err := m.Int64Histogram("dlock.renewals_per_lease", metric.WithUnit("{renewal}"),
		metric.WithDescription("Watchdog renewals per watchdog Lease, when the Lease ends; many is a worker stuck inside."),
		metric.WithExplicitBucketBoundaries(renewalsBuckets...))
	errs = append(errs, err)
	ins.perLease = perLease
	ins.slowHolds = counter("dlock.slow_holds", "{hold}", "Holds that ran past the slow-hold threshold, counted once per hold.")
	for _, err := range errs { // the first: an error is one line
		if err != nil {
			return ins, err
		}
	}
	return ins, nil
}

// labels are the attributes of one (shape, group) pair, made once: the
// span attributes, and the metric options ready to pass (no attribute set
// is built per event).
type labels struct {
	attrs []attribute.KeyValue    // backend, shape, group: every span's and metric's
	span  []trace.SpanStartOption // a span of the lock: internal, with attrs
	base  rec
	acq   [2]rec // acquired, not_acquired
	lost  []rec  // by lostReasons
	renew [2]rec // renewed, failed

	mu   sync.Mutex
	errs map[string]rec // acquire error by error.type
}

// rec is one attribute set as the options of both instrument kinds.
type rec struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newRec(kvs ...attribute.KeyValue) rec {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return rec{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

func newLabels(backend, shape, group string, hasGroup bool) *labels {
	var kvs []attribute.KeyValue
	if backend != "" {
		kvs = append(kvs, keyBackend.String(backend))
	}
	kvs = append(kvs, keyShape.String(observe.CleanValue(shape, maxValueLen)))
	if hasGroup {
		kvs = append(kvs, keyGroup.String(group))
	}
	kvs = kvs[:len(kvs):len(kvs)] // appends copy
	with := func(kv attribute.KeyValue) rec { return newRec(append(kvs, kv)...) }
	l := &labels{attrs: kvs, base: newRec(kvs...), span: []trace.SpanStartOption{internal, trace.WithAttributes(kvs...)}}
	l.acq[0] = with(keyResult.String(string(observe.Acquired)))
	l.acq[1] = with(keyResult.String(string(observe.NotAcquired)))
	l.renew[0] = with(keyRenewalResult.String(renewalRenewed))
	l.renew[1] = with(keyRenewalResult.String(renewalFailed))
	for _, r := range lostReasons {
		l.lost = append(l.lost, with(keyLossReason.String(string(r))))
	}
	return l
}

// acquired returns the options of an Acquire call's result (and error
// type).
func (l *labels) acquired(res observe.AcquireResult, errType string) rec {
	switch res {
	case observe.Acquired:
		return l.acq[0]
	case observe.NotAcquired:
		return l.acq[1]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.errs[errType]
	if !ok {
		if l.errs == nil {
			l.errs = make(map[string]rec)
		}
		r = newRec(append(l.attrs, keyResult.String(string(observe.AcquireErr)), keyErrorType.String(errType))...)
		l.errs[errType] = r
	}
	return r
}

// lostBy returns the options of a loss with reason r.
func (l *labels) lostBy(r observe.LostReason) rec {
	for i, known := range lostReasons {
		if r == known {
			return l.lost[i]
		}
	}
	// A reason this package does not know yet: recorded as it is (the
	// backends' reasons are a small fixed set).
	return newRec(append(l.attrs, keyLossReason.String(observe.CleanValue(string(r), maxValueLen)))...)
}
