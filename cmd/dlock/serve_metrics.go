package main

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// shopMetrics are the shop's own metrics at GET /metrics, there for every
// strategy (also those that take no lock and so emit no lock signals):
//
//	dlock_shop_orders_total{strategy,result}     counter    POST /orders answers by result
//	dlock_shop_order_duration_seconds{strategy}  histogram  time to answer a POST /orders
//
// result is the outcome (sold, sold_out, busy) or the error code of the
// answer (invalid_input, unavailable, …).
type shopMetrics struct {
	strategy string
	orders   *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// shopResults are the results whose counters exist from the start.
var shopResults = []string{"sold", "sold_out", "busy", "bad_json", "invalid_input", "unknown_sku", "body_too_large", "unavailable", "internal"}

// newShopMetrics registers the shop's metrics and the Go and process
// collectors in reg.
func newShopMetrics(reg prometheus.Registerer, strategy string) (*shopMetrics, error) {
	m := &shopMetrics{
		strategy: strategy,
		orders: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dlock", Subsystem: "shop", Name: "orders_total",
			Help: "POST /orders answers, by result: the outcome (sold, sold_out, busy) or the error code."}, []string{"strategy", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "dlock", Subsystem: "shop", Name: "order_duration_seconds",
			Help:    "Time to answer a POST /orders, whatever the result.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"strategy"}),
	}
	for _, c := range []prometheus.Collector{m.orders, m.latency,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, r := range shopResults {
		m.orders.WithLabelValues(strategy, r)
	}
	m.latency.WithLabelValues(strategy)
	return m, nil
}

// observe counts one answer; a nil *shopMetrics counts nothing.
func (m *shopMetrics) observe(result string, took time.Duration) {
	if m == nil {
		return
	}
	m.orders.WithLabelValues(m.strategy, result).Inc()
	m.latency.WithLabelValues(m.strategy).Observe(took.Seconds())
}
