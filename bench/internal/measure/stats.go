package measure

import (
	"slices"
	"time"
)

// Percentile returns the q-quantile (0 < q <= 1) of sorted by the
// nearest-rank method, or 0 for an empty slice.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Waits summarises wait times.
type Waits struct {
	P50, P99, Max time.Duration
}

// Summarise sorts ws in place and returns its p50, p99 and max.
func Summarise(ws []time.Duration) Waits {
	slices.Sort(ws)
	if len(ws) == 0 {
		return Waits{}
	}
	return Waits{P50: Percentile(ws, 0.50), P99: Percentile(ws, 0.99), Max: ws[len(ws)-1]}
}

// Jain returns Jain's fairness index of the per-worker counts:
// (Σx)² / (n·Σx²), 1 when every worker got the same share, 1/n when one got
// everything. It is 0 when there are no counts or all are zero.
func Jain(counts []int64) float64 {
	var sum, sq float64
	for _, c := range counts {
		sum += float64(c)
		sq += float64(c) * float64(c)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(counts)) * sq)
}

// Median returns the median of xs (the mean of the two middle values for an
// even count), or 0 for none. xs is not modified.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
