package dlockotel_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"sync"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockotel"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Record a lock's spans and print them to stdout: the acquisition, a child
// of the caller's span, and the hold, from the grant to the Unlock.
func Example() {
	exporter, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout), stdouttrace.WithoutTimestamps())
	if err != nil {
		panic(err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(stable{exporter}), // stable: see below; a service uses its exporter as it is
		sdktrace.WithIDGenerator(&counterIDs{}),
		sdktrace.WithResource(resource.Empty()),
	)
	defer func() { _ = tp.Shutdown(context.Background()) }()

	obs, err := dlockotel.New(
		dlockotel.WithTracerProvider(tp), // default: the global one (otel.SetTracerProvider)
		dlockotel.WithBackend("redis"),
		dlockotel.WithLockNames(), // the lock name on spans: off by default
	)
	if err != nil {
		panic(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: exampleRedis}) // a redis-server the tests started
	defer rdb.Close()
	client, err := dlock.New(rdb, dlock.Config{Observer: obs})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	ctx, span := tp.Tracer("shop").Start(context.Background(), "checkout")
	err = dlock.Do(ctx, client.Mutex("example:stock:1001"), func(ctx context.Context, l *dlock.Lease) error {
		return nil // the critical section
	})
	span.End()
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// {"Name":"dlock.acquire","SpanContext":{"TraceID":"00000000000000000000000000000001","SpanID":"0000000000000002","TraceFlags":"01","TraceState":"","Remote":false},"Parent":{"TraceID":"00000000000000000000000000000001","SpanID":"0000000000000001","TraceFlags":"01","TraceState":"","Remote":false},"SpanKind":1,"StartTime":"0001-01-01T00:00:00Z","EndTime":"0001-01-01T00:00:00Z","Attributes":[{"Key":"dlock.backend","Value":{"Type":"STRING","Value":"redis"}},{"Key":"dlock.lock.shape","Value":{"Type":"STRING","Value":"mutex"}},{"Key":"dlock.lock.name","Value":{"Type":"STRING","Value":"example:stock:1001"}},{"Key":"dlock.acquire.result","Value":{"Type":"STRING","Value":"acquired"}}],"Events":null,"Links":null,"Status":{"Code":"Unset","Description":""},"DroppedAttributes":0,"DroppedEvents":0,"DroppedLinks":0,"ChildSpanCount":0,"Resource":null,"InstrumentationScope":{"Name":"github.com/dlockgo/dlock/dlockotel","Version":"","SchemaURL":"","Attributes":null},"InstrumentationLibrary":{"Name":"github.com/dlockgo/dlock/dlockotel","Version":"","SchemaURL":"","Attributes":null}}
	// {"Name":"dlock.hold","SpanContext":{"TraceID":"00000000000000000000000000000002","SpanID":"0000000000000003","TraceFlags":"01","TraceState":"","Remote":false},"Parent":{"TraceID":"00000000000000000000000000000000","SpanID":"0000000000000000","TraceFlags":"00","TraceState":"","Remote":false},"SpanKind":1,"StartTime":"0001-01-01T00:00:00Z","EndTime":"0001-01-01T00:00:00Z","Attributes":[{"Key":"dlock.backend","Value":{"Type":"STRING","Value":"redis"}},{"Key":"dlock.lock.shape","Value":{"Type":"STRING","Value":"mutex"}},{"Key":"dlock.lock.name","Value":{"Type":"STRING","Value":"example:stock:1001"}},{"Key":"dlock.hold.renewals","Value":{"Type":"INT64","Value":0}}],"Events":null,"Links":null,"Status":{"Code":"Unset","Description":""},"DroppedAttributes":0,"DroppedEvents":0,"DroppedLinks":0,"ChildSpanCount":0,"Resource":null,"InstrumentationScope":{"Name":"github.com/dlockgo/dlock/dlockotel","Version":"","SchemaURL":"","Attributes":null},"InstrumentationLibrary":{"Name":"github.com/dlockgo/dlock/dlockotel","Version":"","SchemaURL":"","Attributes":null}}
	// {"Name":"checkout","SpanContext":{"TraceID":"00000000000000000000000000000001","SpanID":"0000000000000001","TraceFlags":"01","TraceState":"","Remote":false},"Parent":{"TraceID":"00000000000000000000000000000000","SpanID":"0000000000000000","TraceFlags":"00","TraceState":"","Remote":false},"SpanKind":1,"StartTime":"0001-01-01T00:00:00Z","EndTime":"0001-01-01T00:00:00Z","Attributes":null,"Events":null,"Links":null,"Status":{"Code":"Unset","Description":""},"DroppedAttributes":0,"DroppedEvents":0,"DroppedLinks":0,"ChildSpanCount":1,"Resource":null,"InstrumentationScope":{"Name":"shop","Version":"","SchemaURL":"","Attributes":null},"InstrumentationLibrary":{"Name":"shop","Version":"","SchemaURL":"","Attributes":null}}
}

// stable leaves out of the output what changes from run to run: the
// acquire span's dlock.acquire.wait and the hold span's dlock.lock.token (a
// fencing token starts from the clock). The IDs come from counterIDs, and
// stdouttrace.WithoutTimestamps zeroes the times.
type stable struct{ sdktrace.SpanExporter }

func (s stable) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	stubs := tracetest.SpanStubsFromReadOnlySpans(spans)
	for i := range stubs {
		var kept []attribute.KeyValue
		for _, kv := range stubs[i].Attributes {
			if kv.Key != "dlock.acquire.wait" && kv.Key != "dlock.lock.token" {
				kept = append(kept, kv)
			}
		}
		stubs[i].Attributes = kept
	}
	return s.SpanExporter.ExportSpans(ctx, stubs.Snapshots())
}

// counterIDs numbers traces and spans 1, 2, ...
type counterIDs struct {
	mu          sync.Mutex
	trace, span uint64
}

func (g *counterIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	g.mu.Lock()
	g.trace++
	var tid trace.TraceID
	binary.BigEndian.PutUint64(tid[8:], g.trace)
	g.mu.Unlock()
	return tid, g.NewSpanID(ctx, tid)
}

func (g *counterIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.span++
	var sid trace.SpanID
	binary.BigEndian.PutUint64(sid[:], g.span)
	return sid
}
