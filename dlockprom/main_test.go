package dlockprom_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/observe"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockprom"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rig is a real redis-server, a dlock Client on it and the Observer it
// reports to, registered in its own registry.
type rig struct {
	rdb *redis.Client
	c   *dlock.Client
	obs *dlockprom.Observer
	reg *prometheus.Registry
	log *logBuffer
	ev  *observed
}

func newRig(t *testing.T, copts []dlock.Config, oopts ...dlockprom.Option) *rig {
	t.Helper()
	return newRigOn(t, redistest.Client(t, redistest.Start(t)), copts, oopts...)
}

func newRigOn(t *testing.T, rdb *redis.Client, copts []dlock.Config, oopts ...dlockprom.Option) *rig {
	t.Helper()
	r := &rig{log: &logBuffer{}, rdb: rdb}
	logger := slog.New(slog.NewJSONHandler(r.log, nil))
	obs, err := dlockprom.New(append([]dlockprom.Option{dlockprom.WithLogger(logger)}, oopts...)...)
	if err != nil {
		t.Fatalf("dlockprom.New: %v", err)
	}
	r.obs = obs
	r.ev = &observed{Observer: obs, changed: make(chan struct{})}
	r.reg = prometheus.NewPedanticRegistry()
	if err := r.reg.Register(obs); err != nil {
		t.Fatalf("register: %v", err)
	}
	cfg := dlock.Config{}
	if len(copts) > 0 {
		cfg = copts[0]
	}
	cfg.Observer = r.ev
	c, err := dlock.New(r.rdb, cfg)
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r.c = c
	return r
}

// observed passes every event to the Observer under test and counts the
// LostEvents it has finished handling, so that a test can wait for the
// event itself rather than poll a metric that the handler updates in
// several steps.
type observed struct {
	*dlockprom.Observer
	mu      sync.Mutex
	lost    int
	changed chan struct{} // closed and replaced after each handled LostEvent
}

func (o *observed) ObserveLost(ev observe.LostEvent) {
	o.Observer.ObserveLost(ev)
	o.mu.Lock()
	o.lost++
	close(o.changed)
	o.changed = make(chan struct{})
	o.mu.Unlock()
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

// series is one gathered series: a counter or gauge value, or a histogram.
type series struct {
	labels map[string]string
	value  float64
	count  uint64
	sum    float64
	bucket map[float64]uint64 // cumulative counts by upper bound
}

// gather returns every series of the metric family name.
func gather(t *testing.T, reg prometheus.Gatherer, name string) []series {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	var out []series
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			s := series{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				s.count, s.sum = h.GetSampleCount(), h.GetSampleSum()
				s.bucket = map[float64]uint64{}
				for _, b := range h.GetBucket() {
					s.bucket[b.GetUpperBound()] = b.GetCumulativeCount()
				}
			}
			out = append(out, s)
		}
	}
	return out
}

// get returns the one series of name whose labels include kv (pairs); the
// zero series if there is none.
func get(t *testing.T, reg prometheus.Gatherer, name string, kv ...string) series {
	t.Helper()
	var found []series
	for _, s := range gather(t, reg, name) {
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if s.labels[kv[i]] != kv[i+1] {
				ok = false
			}
		}
		if ok {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 0:
		return series{}
	case 1:
		return found[0]
	}
	t.Fatalf("%s%v: %d series match, want 1", name, kv, len(found))
	return series{}
}

// total sums the values of every series of name.
func total(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	v := 0.0
	for _, s := range gather(t, reg, name) {
		v += s.value
	}
	return v
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// logBuffer collects JSON log lines; safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// records returns the decoded log records whose msg is msg.
func (b *logBuffer) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	text := b.buf.String()
	b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

func labelValues(ss []series, label string) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.labels[label])
	}
	sort.Strings(out)
	return out
}
