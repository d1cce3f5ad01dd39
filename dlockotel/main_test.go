package dlockotel_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockotel"
	"github.com/dlockgo/dlock/internal/leakcheck"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/observe"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// exampleRedis is the address of the redis-server the examples use,
// started by TestMain.
var exampleRedis string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	s, err := redisproc.Start(ctx, redisproc.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlockotel tests:", err)
		os.Exit(1)
	}
	exampleRedis = s.Addr()
	code := m.Run()
	if err := s.Close(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "dlockotel tests: closing the examples' redis-server:", err)
		code = 1
	}
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// rig is a real redis-server, a dlock Client on it, the Observer under
// test and the SDK's in-memory span recorder and metric reader it records
// to.
type rig struct {
	rdb    *redis.Client
	c      *dlock.Client
	obs    *dlockotel.Observer
	ev     *counted
	tp     *sdktrace.TracerProvider
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

// newRig starts a redis-server and returns a rig on it whose Observer has
// opts (after WithTracerProvider and WithMeterProvider).
func newRig(t *testing.T, cfg dlock.Config, opts ...dlockotel.Option) *rig {
	t.Helper()
	return newRigOn(t, redistest.Client(t, redistest.Start(t)), cfg, opts...)
}

func newRigOn(t *testing.T, rdb *redis.Client, cfg dlock.Config, opts ...dlockotel.Option) *rig {
	t.Helper()
	r := newRecorder(t, opts...)
	r.rdb = rdb
	r.c = r.client(t, cfg)
	return r
}

// newRecorder returns a rig without a store: the Observer with opts (after
// WithTracerProvider and WithMeterProvider) and what it records to.
func newRecorder(t *testing.T, opts ...dlockotel.Option) *rig {
	t.Helper()
	r := &rig{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	t.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	obs, err := dlockotel.New(append([]dlockotel.Option{dlockotel.WithTracerProvider(r.tp),
		dlockotel.WithMeterProvider(mp)}, opts...)...)
	if err != nil {
		t.Fatalf("dlockotel.New: %v", err)
	}
	r.obs = obs
	r.ev = newCounted(obs)
	return r
}

// client returns another dlock Client on the rig's server, reporting to
// the rig's Observer (another owner of the same locks).
func (r *rig) client(t *testing.T, cfg dlock.Config) *dlock.Client {
	t.Helper()
	cfg.Observer = r.ev
	c, err := dlock.New(r.rdb, cfg)
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// counted passes every event to the Observer under test (still an
// observe.Tracer: StartAcquire is promoted) and counts the LostEvents it
// has finished handling, so that a test waits for a loss found in the
// background by the event itself rather than polling.
type counted struct {
	*dlockotel.Observer
	mu      sync.Mutex
	lost    int
	changed chan struct{} // closed and replaced after each handled LostEvent
}

var _ observe.Tracer = (*counted)(nil)

func newCounted(o *dlockotel.Observer) *counted {
	return &counted{Observer: o, changed: make(chan struct{})}
}

func (c *counted) ObserveLost(ev observe.LostEvent) {
	c.Observer.ObserveLost(ev)
	c.mu.Lock()
	c.lost++
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// waitLost waits until the Observer has handled n LostEvents in all.
func (r *rig) waitLost(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		r.ev.mu.Lock()
		got, changed := r.ev.lost, r.ev.changed
		r.ev.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%d LostEvents handled within 20s, want %d", got, n)
		}
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ended returns the ended spans called name, in the order they ended.
func (r *rig) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range r.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one ended span called name; it fails the test unless
// there is exactly one.
func (r *rig) one(t *testing.T, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	ss := r.ended(name)
	if len(ss) != 1 {
		t.Fatalf("%d %s spans ended, want 1: %v", len(ss), name, describe(r.spans.Ended()))
	}
	return ss[0]
}

// describe lists spans for a failure message: each name with its dlock
// attributes (a store client's spans by name only: their statements are
// long).
func describe(ss []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range ss {
		var kvs []string
		for _, kv := range s.Attributes() {
			if strings.HasPrefix(string(kv.Key), "dlock.") || kv.Key == "error.type" {
				kvs = append(kvs, fmt.Sprintf("%s=%v", kv.Key, kv.Value.Emit()))
			}
		}
		out = append(out, fmt.Sprintf("%s%v", s.Name(), kvs))
	}
	return out
}

// attr returns the attribute key of s; ok false if s has none.
func attr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// wantAttrs fails the test unless s has each attribute of want with its
// value (a string, int, int64, float64 or bool).
func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]any) {
	t.Helper()
	for k, w := range want {
		v, ok := attr(s, k)
		if !ok {
			t.Errorf("span %s has no attribute %s (has %v)", s.Name(), k, s.Attributes())
			continue
		}
		if got := v.AsInterface(); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("span %s: %s = %v, want %v", s.Name(), k, got, w)
		}
	}
}

// noAttrs fails the test if s has any of keys.
func noAttrs(t *testing.T, s sdktrace.ReadOnlySpan, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if v, ok := attr(s, k); ok {
			t.Errorf("span %s has %s = %v, want none", s.Name(), k, v.AsInterface())
		}
	}
}

// wantStatus fails the test unless s has status code c.
func wantStatus(t *testing.T, s sdktrace.ReadOnlySpan, c codes.Code) {
	t.Helper()
	if got := s.Status().Code; got != c {
		t.Errorf("span %s: status %v (%q), want %v", s.Name(), got, s.Status().Description, c)
	}
}

// childOf fails the test unless s's parent is parent.
func childOf(t *testing.T, s sdktrace.ReadOnlySpan, parent trace.SpanContext) {
	t.Helper()
	if got := s.Parent(); got.SpanID() != parent.SpanID() || got.TraceID() != parent.TraceID() {
		t.Errorf("span %s: parent %v/%v, want %v/%v", s.Name(), got.TraceID(), got.SpanID(), parent.TraceID(), parent.SpanID())
	}
}

// collect reads every metric now.
func (r *rig) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// matches reports whether set has every attribute of kv (key, value pairs).
func matches(set attribute.Set, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		v, ok := set.Value(attribute.Key(kv[i]))
		if !ok || v.Emit() != kv[i+1] {
			return false
		}
	}
	return true
}

// count returns the sum of the Int64 counter name over its data points
// with the attributes kv, and how many data points matched.
func (r *rig) count(t *testing.T, name string, kv ...string) (sum int64, points int) {
	t.Helper()
	m, ok := r.collect(t)[name]
	if !ok {
		return 0, 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is a %T, want an int64 counter", name, m.Data)
	}
	for _, dp := range s.DataPoints {
		if matches(dp.Attributes, kv) {
			sum += dp.Value
			points++
		}
	}
	return sum, points
}

// wantCount fails the test unless counter name sums to want over the data
// points with attributes kv, and at least one such point exists.
func (r *rig) wantCount(t *testing.T, want int64, name string, kv ...string) {
	t.Helper()
	got, points := r.count(t, name, kv...)
	if points == 0 || got != want {
		t.Errorf("%s%v = %d over %d points, want %d", name, kv, got, points, want)
	}
}

// hist returns the count and sum of the Float64 histogram name over its
// data points with the attributes kv.
func (r *rig) hist(t *testing.T, name string, kv ...string) (count uint64, sum float64) {
	t.Helper()
	m, ok := r.collect(t)[name]
	if !ok {
		return 0, 0
	}
	switch h := m.Data.(type) {
	case metricdata.Histogram[float64]:
		for _, dp := range h.DataPoints {
			if matches(dp.Attributes, kv) {
				count += dp.Count
				sum += dp.Sum
			}
		}
	case metricdata.Histogram[int64]:
		for _, dp := range h.DataPoints {
			if matches(dp.Attributes, kv) {
				count += dp.Count
				sum += float64(dp.Sum)
			}
		}
	default:
		t.Fatalf("%s is a %T, want a histogram", name, m.Data)
	}
	return count, sum
}

// attrKeys returns every attribute key of every data point of metric name.
func (r *rig) attrKeys(t *testing.T, name string) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	add := func(set attribute.Set) {
		for _, kv := range set.ToSlice() {
			keys[string(kv.Key)] = true
		}
	}
	m, ok := r.collect(t)[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes)
		}
	default:
		t.Fatalf("%s is a %T", name, m.Data)
	}
	return keys
}
