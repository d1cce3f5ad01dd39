package drill

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
)

// ContentionResult is what the contention drill (000 §3.5) measured.
type ContentionResult struct {
	Backend      string  `json:"backend"`
	Workers      int     `json:"workers"`
	Loops        int     `json:"loops"`
	WorkMS       float64 `json:"work_ms"`
	Acquisitions int     `json:"acquisitions"`
	P50MS        float64 `json:"p50_ms"`
	P90MS        float64 `json:"p90_ms"`
	P99MS        float64 `json:"p99_ms"`
	MaxMS        float64 `json:"max_ms"`
	ElapsedMS    float64 `json:"elapsed_ms"`
	HandoffsPerS float64 `json:"handoffs_per_s"` // acquisitions per second of the whole run
	// DoubleGrants counts the acquisitions that got in while another
	// worker was inside (from the spans).
	DoubleGrants int      `json:"double_grants"`
	Histogram    []Bucket `json:"histogram"`
	Spans        []Span   `json:"-"`
}

// Contention runs workers × loops acquisitions of one lock, each worker its
// own Client (as separate service instances would be), holding it for work,
// and measures the time each acquisition waited.
func Contention(ctx context.Context, b *backend.Backend, workers, loops int, work time.Duration) (*ContentionResult, error) {
	if workers < 1 || loops < 1 || work < 0 {
		return nil, fmt.Errorf("workers and loops must be >= 1, work >= 0")
	}
	name := "drill:contention:" + randomID()
	tl := NewTimeline()
	var mu sync.Mutex
	var waits []time.Duration
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	clients := make([]backend.Client, workers)
	for w := range clients {
		c, err := b.NewClient(ctx, backend.ClientOptions{Label: fmt.Sprintf("worker-%d", w)})
		if err != nil {
			return nil, err
		}
		defer c.Close()
		clients[w] = c
	}
	start := time.Now()
	for w, c := range clients {
		who := fmt.Sprintf("worker-%d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			my := make([]time.Duration, 0, loops)
			for i := 0; i < loops; i++ {
				t0 := time.Now()
				l, err := c.Lock(name).Acquire(ctx, dlock.Wait(time.Minute))
				if err != nil {
					errs <- err
					return
				}
				my = append(my, time.Since(t0))
				span := tl.Begin(Span{Lane: "one lock, each worker its own client", Who: who})
				if err := sleep(ctx, work); err != nil {
					errs <- err
					return
				}
				tl.End(span)
				if err := l.Unlock(context.WithoutCancel(ctx)); err != nil {
					errs <- err
					return
				}
			}
			mu.Lock()
			waits = append(waits, my...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		return nil, err
	}
	res := &ContentionResult{Backend: b.Kind, Workers: workers, Loops: loops, WorkMS: msf(work), Acquisitions: len(waits),
		ElapsedMS: msf(elapsed), HandoffsPerS: float64(len(waits)) / elapsed.Seconds()}
	slices.Sort(waits)
	res.P50MS, res.P90MS = msf(pct(waits, 50)), msf(pct(waits, 90))
	res.P99MS, res.MaxMS = msf(pct(waits, 99)), msf(waits[len(waits)-1])
	res.Histogram = histogram(waits)
	res.Spans = tl.Spans()
	res.DoubleGrants = DoubleGrants(res.Spans)
	return res, nil
}

// Summary returns what the text and the HTML report show.
func (r *ContentionResult) Summary() *Summary {
	return &Summary{
		Title: fmt.Sprintf("contention (000 §3.5) on %s: %s × %s on one lock, %.1f ms of work inside",
			r.Backend, plural(r.Workers, "worker"), plural(r.Loops, "loop"), r.WorkMS),
		Histogram: r.Histogram,
		Figures: []Figure{
			{"acquisitions", fmt.Sprintf("%d in %.0f ms: %.0f/s", r.Acquisitions, r.ElapsedMS, r.HandoffsPerS)},
			{"wait p50 / p90 / p99 / max", fmt.Sprintf("%.2f / %.2f / %.2f / %.2f ms", r.P50MS, r.P90MS, r.P99MS, r.MaxMS)},
			{"got in while another was inside", fmt.Sprint(r.DoubleGrants)},
		},
		Spans: r.Spans,
	}
}

// pct returns the p-th percentile of sorted durations (nearest rank).
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(0, min(len(sorted)-1, i-1))]
}

// Bucket is one bar of a wait-time histogram: waits in (LoMS, HiMS].
type Bucket struct {
	LoMS  float64 `json:"lo_ms"`
	HiMS  float64 `json:"hi_ms"`
	Count int     `json:"count"`
}

// histogram buckets durations on a 1-2-5 scale from 0.1 ms.
func histogram(ds []time.Duration) []Bucket {
	edges := []float64{0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 60000}
	bs := make([]Bucket, len(edges))
	lo := 0.0
	for i, hi := range edges {
		bs[i] = Bucket{LoMS: lo, HiMS: hi}
		lo = hi
	}
	for _, d := range ds {
		v := msf(d)
		i, _ := slices.BinarySearch(edges, v)
		bs[min(i, len(bs)-1)].Count++
	}
	// trim empty buckets at both ends
	first, last := 0, len(bs)-1
	for first < last && bs[first].Count == 0 {
		first++
	}
	for last > first && bs[last].Count == 0 {
		last--
	}
	return bs[first : last+1]
}
