package dlockotel

import (
	"context"
	"sync"
	"time"

	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// scope is the instrumentation scope of the tracer and the meter.
const scope = "github.com/dlockgo/dlock/dlockotel"

// Observer records lock events as OpenTelemetry spans and metrics. It is an
// observe.Tracer: give it to a backend's Config (dlock.Config.Observer,
// etcdlock's, zklock's). One Observer may serve several clients of one
// backend. It is safe for concurrent use.
type Observer struct {
	tracer  trace.Tracer
	m       instruments
	backend string
	names   bool
	groups  *observe.Groups // nil: no dlock.lock.group
	slow    slowHolds

	mu     sync.RWMutex
	labels map[pair]*labels
}

var _ observe.Tracer = (*Observer)(nil)

// pair is one (shape, group) label pair.
type pair struct{ shape, group string }

// New returns an Observer that records to the providers of opts (by
// default the global ones, as they are when New is called: a global
// provider set later is used too, the global providers delegate to it).
// It returns an error, and no Observer, if an option is invalid or an
// instrument cannot be made.
func New(opts ...Option) (*Observer, error) {
	cfg := config{maxGroups: observe.DefaultMaxGroups, slowAfter: DefaultSlowHold}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, seam.WrapCall("new opentelemetry observer", err)
		}
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	ins, err := newInstruments(cfg.mp.Meter(scope))
	if err != nil {
		return nil, seam.WrapCall("new opentelemetry observer", err)
	}
	o := &Observer{
		tracer:  cfg.tp.Tracer(scope),
		m:       ins,
		backend: cfg.backend,
		names:   cfg.names,
		slow:    slowHolds{after: cfg.slowAfter},
		labels:  make(map[pair]*labels),
	}
	if cfg.group != nil {
		o.groups = observe.NewGroups(cfg.group, cfg.maxGroups)
	}
	return o, nil
}

// labelsOf returns the labels of a lock of shape called name, made the
// first time its (shape, group) pair is seen; the counters of losses,
// lost unlocks and slow holds of the pair then start at 0.
func (o *Observer) labelsOf(shape, name string) *labels {
	p := pair{shape: shape}
	if o.groups != nil {
		p.group = o.groups.Of(name)
	}
	o.mu.RLock()
	l := o.labels[p]
	o.mu.RUnlock()
	if l != nil {
		return l
	}
	o.mu.Lock()
	if l = o.labels[p]; l != nil {
		o.mu.Unlock()
		return l
	}
	l = newLabels(o.backend, shape, p.group, o.groups != nil)
	o.labels[p] = l
	o.mu.Unlock()
	ctx := context.Background()
	for _, r := range l.lost {
		o.m.lost.Add(ctx, 0, r.add...)
	}
	o.m.lostUnlocks.Add(ctx, 0, l.base.add...)
	o.m.failedRel.Add(ctx, 0, l.base.add...)
	o.m.slowHolds.Add(ctx, 0, l.base.add...)
	return l
}

// ObserveAcquire implements observe.Observer, for a backend that does not
// bracket its Acquire calls (StartAcquire): the call's span is recorded
// when it ends, from its start (now - Wait), as a root span.
func (o *Observer) ObserveAcquire(ev observe.AcquireEvent) {
	l := o.labelsOf(ev.Shape, ev.Name)
	_, span := o.tracer.Start(context.Background(), spanAcquire, o.startedAt(l, ev.Name, time.Now().Add(-ev.Wait))...)
	o.acquireEnded(span, l, ev)
}

// StartAcquire implements observe.Tracer: it starts the span of an Acquire
// call, a child of ctx's span, and returns the context the call's store
// requests run under (so that a traced store client's spans, redisotel's,
// are its children). The returned function ends the span with the call's
// outcome and records its metrics.
func (o *Observer) StartAcquire(ctx context.Context, shape, name string) (context.Context, func(observe.AcquireEvent)) {
	l := o.labelsOf(shape, name)
	ctx, span := o.tracer.Start(ctx, spanAcquire, o.startOpts(l, name)...)
	return ctx, func(ev observe.AcquireEvent) { o.acquireEnded(span, l, ev) }
}

// acquireEnded ends the span of an Acquire call and records its metrics.
func (o *Observer) acquireEnded(span trace.Span, l *labels, ev observe.AcquireEvent) {
	errType := ""
	if ev.Result == observe.AcquireErr {
		errType = errorType(ev.Err)
	}
	endAcquireSpan(span, ev, errType)
	o.m.acquire.Record(context.Background(), ev.Wait.Seconds(), l.acquired(ev.Result, errType).rec...)
}

// ObserveRelease implements observe.Observer. The Unlock that ends a hold
// (Last) records the hold's span, unless it found the lock lost: the
// LostEvent that follows it records the span then.
func (o *Observer) ObserveRelease(ev observe.ReleaseEvent) {
	l := o.labelsOf(ev.Shape, ev.Name)
	ctx := context.Background()
	o.m.hold.Record(ctx, ev.Held.Seconds(), l.base.rec...)
	if ev.Lease > 0 {
		o.m.utilization.Record(ctx, float64(ev.Held)/float64(ev.Lease), l.base.rec...)
	}
	if ev.FoundLost {
		o.m.lostUnlocks.Add(ctx, 1, l.base.add...)
	}
	if ev.Err != nil {
		o.m.failedRel.Add(ctx, 1, l.base.add...)
	}
	if !ev.LostBefore && ev.Lease == 0 { // a Lease lost before ended with its LostEvent
		o.m.perLease.Record(ctx, int64(ev.Renewals), l.base.rec...)
	}
	if !ev.Last {
		return
	}
	if o.slow.ended(holdKey{ev.Shape, ev.Name, ev.Token}, ev.Held, !ev.LostBefore) {
		o.m.slowHolds.Add(ctx, 1, l.base.add...)
	}
	if !ev.FoundLost {
		o.holdSpan(l, ev.Name, ev.Token, ev.Granted, ev.Held, ev.Lease, ev.Renewals, "")
	}
}

// ObserveLost implements observe.Observer: it records the hold's span,
// ended by the loss.
func (o *Observer) ObserveLost(ev observe.LostEvent) {
	l := o.labelsOf(ev.Shape, ev.Name)
	ctx := context.Background()
	o.m.lost.Add(ctx, 1, l.lostBy(ev.Reason).add...)
	if ev.Leases > 0 && ev.Lease == 0 {
		for range ev.Leases {
			o.m.perLease.Record(ctx, int64(ev.Renewals), l.base.rec...)
		}
	}
	// Leases == 0: an Unlock found the loss, and its ReleaseEvent already
	// checked the hold for slowness.
	if o.slow.ended(holdKey{ev.Shape, ev.Name, ev.Token}, ev.Held, ev.Leases > 0) {
		o.m.slowHolds.Add(ctx, 1, l.base.add...)
	}
	o.holdSpan(l, ev.Name, ev.Token, ev.Granted, ev.Held, ev.Lease, ev.Renewals, ev.Reason)
}

// ObserveRenewal implements observe.Observer.
func (o *Observer) ObserveRenewal(ev observe.RenewalEvent) {
	l := o.labelsOf(ev.Shape, ev.Name)
	ctx := context.Background()
	if !ev.OK {
		o.m.renewals.Add(ctx, 1, l.renew[1].add...)
		return
	}
	o.m.renewals.Add(ctx, 1, l.renew[0].add...)
	if o.slow.renewed(holdKey{ev.Shape, ev.Name, ev.Token}, ev.Held) {
		o.m.slowHolds.Add(ctx, 1, l.base.add...)
	}
}
