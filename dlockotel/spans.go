package dlockotel

import (
	"context"
	"errors"
	"time"

	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The span and event names.
const (
	spanAcquire = "dlock.acquire"
	spanHold    = "dlock.hold"
	eventLost   = "dlock.hold.lost"
)

// internal is the kind of every span (the store client's spans under an
// acquire span are the client spans).
var internal = trace.WithSpanKind(trace.SpanKindInternal)

// startOpts returns the options every span of a lock starts with, made
// once per label set unless the span carries the lock name.
func (o *Observer) startOpts(l *labels, name string) []trace.SpanStartOption {
	if !o.names {
		return l.span
	}
	return []trace.SpanStartOption{internal, trace.WithAttributes(append(l.attrs, keyName.String(observe.CleanValue(name, 0)))...)}
}

// startedAt returns startOpts with the span's start time t (a span made
// when it ends).
func (o *Observer) startedAt(l *labels, name string, t time.Time) []trace.SpanStartOption {
	opts := o.startOpts(l, name)
	return append(opts[:len(opts):len(opts)], trace.WithTimestamp(t))
}

// endAcquireSpan sets an Acquire call's outcome on its span and ends it. A
// call that got no lock (not_acquired) is not an error: the lock was busy.
func endAcquireSpan(span trace.Span, ev observe.AcquireEvent, errType string) {
	if span.IsRecording() {
		span.SetAttributes(keyResult.String(string(ev.Result)), keyWait.Float64(ev.Wait.Seconds()))
		if ev.Result == observe.Acquired {
			span.SetAttributes(keyToken.Int64(ev.Token))
		}
		if ev.Result == observe.AcquireErr {
			span.SetAttributes(keyErrorType.String(errType))
			// The error's text names the lock: the status says its type only.
			span.SetStatus(codes.Error, "acquire failed: "+errType)
		}
	}
	span.End()
}

// holdSpan records the span of a hold granted at granted (zero: held
// before now) that ended now: from its grant to its last Unlock, or to its
// loss (lost: the reason; "" when it was released). The span is made at the
// end, with the grant's time as its start, so that a hold costs nothing
// while it is held (holds can last hours; a span is exported only when it
// ends anyway). It is a root span: the events of a hold carry no context.
func (o *Observer) holdSpan(l *labels, name string, token int64, granted time.Time, held, lease time.Duration, renewals int, lost observe.LostReason) {
	end := time.Now()
	if granted.IsZero() { // an event made by hand, without the grant's time
		granted = end.Add(-held)
	}
	_, span := o.tracer.Start(context.Background(), spanHold, o.startedAt(l, name, granted)...)
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(keyToken.Int64(token), keyHoldRenewals.Int(renewals))
	if lease > 0 {
		span.SetAttributes(keyHoldLease.Float64(lease.Seconds()))
	}
	if lost != "" {
		span.AddEvent(eventLost, trace.WithTimestamp(end), trace.WithAttributes(keyLossReason.String(observe.CleanValue(string(lost), maxValueLen))))
		span.SetStatus(codes.Error, "lock lost ("+string(lost)+")")
	}
	span.End(trace.WithTimestamp(end))
}

// errorType is the error.type of a failed Acquire call: a short name of
// its cause, or "_OTHER" (a store error, say).
func errorType(err error) string {
	switch {
	case err == nil:
		return "_OTHER"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, seam.ErrClosed):
		return "closed"
	case errors.Is(err, seam.ErrInvalidName), errors.Is(err, seam.ErrInvalidDuration), errors.Is(err, seam.ErrInvalidArgument):
		return "invalid_argument"
	case errors.Is(err, seam.ErrWrongType):
		return "wrong_type"
	case errors.Is(err, seam.ErrUpgrade):
		return "upgrade"
	case errors.Is(err, seam.ErrNotReplicated):
		return "not_replicated"
	}
	return "_OTHER"
}
