package dlockotel_test

import (
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// With redisotel on the go-redis client, the commands an Acquire sends are
// children of its span (the store calls run under the context the
// Tracer's StartAcquire returns, through seam.Keeper.Begin), also when it
// waits for a holder; the Unlock's commands are not: they run under the
// caller's context.
//
// The go-redis client has ContextTimeoutEnabled, as dlock.New's doc asks of
// a client whose hooks must see every call: without it the calls made under
// a ctx deadline (testCtx has one) go through a copy that runs no hooks.
func TestRedisotelCommandsNestUnderAcquire(t *testing.T) {
	r := newRecorder(t)
	r.rdb = redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = r.rdb.Close() })
	if err := redisotel.InstrumentTracing(r.rdb, redisotel.WithTracerProvider(r.tp)); err != nil {
		t.Fatalf("redisotel: %v", err)
	}
	r.c = r.client(t, dlock.Config{})
	other := r.client(t, dlock.Config{})
	ctx := testCtx(t)
	tracer := r.tp.Tracer("test")

	pctx, parent := tracer.Start(ctx, "checkout")
	l, err := r.c.Mutex("stock:1001").Acquire(pctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	acq := r.one(t, "dlock.acquire")
	childOf(t, acq, parent.SpanContext())
	if cmds := childrenOf(r.spans.Ended(), acq.SpanContext()); len(cmds) == 0 {
		t.Fatalf("no redis command span under the acquire span; spans: %v", describe(r.spans.Ended()))
	}
	r.spans.Reset()
	if err := l.Unlock(pctx); err != nil {
		t.Fatal(err)
	}
	release := childrenOf(r.spans.Ended(), parent.SpanContext())
	if len(release) == 0 {
		t.Fatalf("the Unlock's commands are not children of the caller's span; spans: %v", describe(r.spans.Ended()))
	}
	parent.End()

	// A waiting Acquire: the refused attempt and whatever follows until the
	// grant, all under its span.
	held, err := other.Mutex("stock:2").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r.spans.Reset()
	got := make(chan error, 1)
	wctx, waiter := tracer.Start(ctx, "waiter")
	go func() {
		l, err := r.c.Mutex("stock:2").Acquire(wctx, dlock.Wait(10*time.Second))
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	// Unlock the holder once the waiter's first attempt was refused (its
	// command span ended).
	deadline := time.Now().Add(10 * time.Second)
	for len(redisSpansIn(r.spans.Ended(), waiter.SpanContext().TraceID())) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter sent no command")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	waiter.End()
	var wacq sdktrace.ReadOnlySpan
	for _, s := range r.ended("dlock.acquire") {
		if s.Parent().SpanID() == waiter.SpanContext().SpanID() {
			wacq = s
		}
	}
	if wacq == nil {
		t.Fatalf("no acquire span under the waiter's: %v", describe(r.spans.Ended()))
	}
	wantAttrs(t, wacq, map[string]any{"dlock.acquire.result": "acquired"})
	// A command sent on a new connection is a child of redisotel's dial
	// span: a descendant, not a child, of the span it ran under.
	all := r.spans.Ended()
	for _, s := range redisSpansIn(all, waiter.SpanContext().TraceID()) {
		inCall := !s.StartTime().Before(wacq.StartTime()) && !s.EndTime().After(wacq.EndTime())
		switch {
		case inCall && !descends(all, s, wacq.SpanContext().SpanID()):
			t.Errorf("command %s sent during the acquire call does not descend from the acquire span", s.Name())
		case !inCall && descends(all, s, wacq.SpanContext().SpanID()):
			t.Errorf("command %s sent after the acquire call descends from the acquire span", s.Name())
		}
	}
	if n := len(childrenOf(r.spans.Ended(), wacq.SpanContext())); n == 0 {
		t.Error("no command span under the waiting acquire's span")
	}
}

// childrenOf returns the spans whose parent is sc.
func childrenOf(ss []sdktrace.ReadOnlySpan, sc trace.SpanContext) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range ss {
		if s.Parent().SpanID() == sc.SpanID() && s.Parent().TraceID() == sc.TraceID() {
			out = append(out, s)
		}
	}
	return out
}

// descends reports whether s is a descendant of the span with id among
// the spans all.
func descends(all []sdktrace.ReadOnlySpan, s sdktrace.ReadOnlySpan, id trace.SpanID) bool {
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, x := range all {
		byID[x.SpanContext().SpanID()] = x
	}
	for p := s.Parent(); p.IsValid(); {
		if p.SpanID() == id {
			return true
		}
		up, ok := byID[p.SpanID()]
		if !ok {
			return false
		}
		p = up.Parent()
	}
	return false
}

// redisSpansIn returns redisotel's spans of trace id.
func redisSpansIn(ss []sdktrace.ReadOnlySpan, id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range ss {
		if s.SpanContext().TraceID() == id && s.InstrumentationScope().Name != "test" && s.Name() != "dlock.acquire" && s.Name() != "dlock.hold" {
			out = append(out, s)
		}
	}
	return out
}
