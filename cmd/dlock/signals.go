package main

import (
	"math"
	"strconv"

	"github.com/dlockgo/dlock/cmd/dlock/table"

	"github.com/dlockgo/dlock/dlockprom"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// lockSignals are the four lock signals of 000 §2.13, read back from the
// Prometheus metrics of one run: what `dlock serve` exposes at /metrics.
type lockSignals struct {
	Acquired    float64 `json:"acquired"`
	NotAcquired float64 `json:"not_acquired"`
	Errors      float64 `json:"acquire_errors"`
	WaitP99MS   float64 `json:"wait_p99_ms"`
	HoldP99MS   float64 `json:"hold_p99_ms"`
	Lost        float64 `json:"leases_lost"`
	FoundLost   float64 `json:"unlocks_found_lost"`
	Renewals    float64 `json:"renewals"`
}

// newSignalRegistry returns an Observer registered in a fresh registry.
func newSignalRegistry() (*dlockprom.Observer, *prometheus.Registry, error) {
	obs, err := dlockprom.New()
	if err != nil {
		return nil, nil, err
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(obs); err != nil {
		return nil, nil, err
	}
	return obs, reg, nil
}

// readSignals sums a registry's dlock metrics over all labels.
func readSignals(reg *prometheus.Registry) (lockSignals, error) {
	var s lockSignals
	fams, err := reg.Gather()
	if err != nil {
		return s, err
	}
	for _, f := range fams {
		switch f.GetName() {
		case "dlock_acquire_total":
			for _, m := range f.GetMetric() {
				switch metricLabel(m, "result") {
				case "acquired":
					s.Acquired += m.GetCounter().GetValue()
				case "not_acquired":
					s.NotAcquired += m.GetCounter().GetValue()
				default:
					s.Errors += m.GetCounter().GetValue()
				}
			}
		case "dlock_acquire_wait_seconds":
			s.WaitP99MS = 1000 * quantile(f, 0.99)
		case "dlock_hold_seconds":
			s.HoldP99MS = 1000 * quantile(f, 0.99)
		case "dlock_lost_total":
			s.Lost = sum(f)
		case "dlock_unlock_found_lost_total":
			s.FoundLost = sum(f)
		case "dlock_renewals_total":
			s.Renewals = sum(f)
		}
	}
	return s, nil
}

func metricLabel(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func sum(f *dto.MetricFamily) float64 {
	t := 0.0
	for _, m := range f.GetMetric() {
		t += m.GetCounter().GetValue()
	}
	return t
}

// quantile estimates the q-quantile of a histogram family (all series
// merged) by linear interpolation inside the bucket, as histogram_quantile.
func quantile(f *dto.MetricFamily, q float64) float64 {
	type bucket struct{ upper, count float64 }
	var bs []bucket
	total := 0.0
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		total += float64(h.GetSampleCount())
		for i, b := range h.GetBucket() {
			if i >= len(bs) {
				bs = append(bs, bucket{upper: b.GetUpperBound()})
			}
			bs[i].count += float64(b.GetCumulativeCount())
		}
	}
	if total == 0 {
		return 0
	}
	rank, lower, prev := q*total, 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if b.count == prev {
				return b.upper
			}
			return lower + (b.upper-lower)*(rank-prev)/(b.count-prev)
		}
		lower, prev = b.upper, b.count
	}
	if len(bs) > 0 {
		return bs[len(bs)-1].upper // beyond the last bucket: its bound, a floor
	}
	return math.NaN()
}

// signalTable is one row of lock signals per strategy.
func signalTable(names []string, sig []lockSignals) table.Table {
	type named struct {
		name string
		lockSignals
	}
	rows := make([]named, len(sig))
	for i, s := range sig {
		rows[i] = named{names[i], s}
	}
	n := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
	t := table.Of([]table.Column[named]{
		table.Col("strategy", func(x named) string { return x.name }),
		table.Col("acquired", func(x named) string { return n(x.Acquired) }),
		table.Col("not acquired", func(x named) string { return n(x.NotAcquired) }),
		table.Col("errors", func(x named) string { return n(x.Errors) }),
		table.Col("wait p99 ms", func(x named) string { return ms(x.WaitP99MS) }),
		table.Col("hold p99 ms", func(x named) string { return ms(x.HoldP99MS) }),
		table.Col("leases lost", func(x named) string { return n(x.Lost) }),
		table.Col("unlocks found lost", func(x named) string { return n(x.FoundLost) }),
		table.Col("renewals", func(x named) string { return n(x.Renewals) }),
	}, rows)
	t.Title = "lock signals (the metrics dlock serve exposes at /metrics):"
	return t
}
