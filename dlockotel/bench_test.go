package dlockotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockotel"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/observe"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tnoop "go.opentelemetry.io/otel/trace/noop"
)

// observers are what the benchmarks compare: observe.Nop; dlockotel with
// OTel's no-op providers (what a program that never set up OTel pays); and
// dlockotel with the SDK, every span sampled and kept in memory (dropped
// each round), metrics aggregated by a ManualReader.
func observers(b *testing.B) map[string]observe.Observer {
	b.Helper()
	noopObs, err := dlockotel.New(dlockotel.WithTracerProvider(tnoop.NewTracerProvider()), dlockotel.WithMeterProvider(noop.NewMeterProvider()))
	if err != nil {
		b.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(dropping{rec}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	sdkObs, err := dlockotel.New(dlockotel.WithTracerProvider(tp), dlockotel.WithMeterProvider(mp), dlockotel.WithBackend("redis"))
	if err != nil {
		b.Fatal(err)
	}
	return map[string]observe.Observer{"nop": observe.Nop{}, "otel-noop": noopObs, "otel-sdk": sdkObs}
}

// dropping is a span processor that keeps nothing (the benchmark measures
// recording, not a growing slice).
type dropping struct{ *tracetest.SpanRecorder }

func (dropping) OnEnd(sdktrace.ReadOnlySpan) {}

// One Acquire and Unlock of a Mutex on a real redis-server, per observer.
func BenchmarkAcquireUnlock(b *testing.B) {
	rdb := redistest.Client(b, redistest.Start(b))
	ctx := context.Background()
	for _, name := range []string{"nop", "otel-noop", "otel-sdk"} {
		obs := observers(b)[name]
		b.Run(name, func(b *testing.B) {
			c, err := dlock.New(rdb, dlock.Config{Observer: obs})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			m := c.Mutex("bench:1")
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.Acquire(ctx, dlock.Wait(0))
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The events of one Acquire and Unlock, without a store: what the
// Observer itself costs per locked section.
func BenchmarkEvents(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"nop", "otel-noop", "otel-sdk"} {
		obs := observers(b)[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				acquired := observe.AcquireEvent{Shape: "mutex", Name: "stock:1001", Result: observe.Acquired, Wait: time.Millisecond}
				if t, ok := obs.(observe.Tracer); ok {
					_, end := t.StartAcquire(ctx, "mutex", "stock:1001")
					end(acquired)
				} else {
					obs.ObserveAcquire(acquired)
				}
				obs.ObserveRelease(observe.ReleaseEvent{Shape: "mutex", Name: "stock:1001", Token: 7, Held: time.Millisecond, Last: true})
			}
		})
	}
}
