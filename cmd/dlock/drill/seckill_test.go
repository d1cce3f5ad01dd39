package drill_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/dlockgo/dlock/cmd/dlock/drill"
)

// TestSeckillBoundsConcurrency: a buyer is a request, not a goroutine held
// for the whole sale: 1000 buyers with Concurrency 8 never run more than a
// bounded number of goroutines above the baseline, and every strategy but
// naive sells exactly the stock with a clean verdict (a buyer may still be
// turned away busy on a very loaded machine, after the units are gone).
func TestSeckillBoundsConcurrency(t *testing.T) {
	r := openRedis(t)
	const buyers, concurrency = 1000, 8
	base := runtime.NumGoroutine()
	var peak atomic.Int64
	res, err := drill.Seckill(context.Background(), r, drill.SeckillOptions{
		Buyers: buyers, Stock: 10, Replicas: 3, Concurrency: concurrency,
		Strategies: []string{"conditional", "fenced", "prededuct"},
		Progress: func(_ string, done, _ int) {
			if done%50 == 0 {
				if n := int64(runtime.NumGoroutine()); n > peak.Load() {
					peak.Store(n)
				}
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Each replica has its pools, a watchdog and (prededuct) a consumer:
	// a bounded number, not one per buyer.
	if extra := peak.Load() - int64(base); extra > 120 {
		t.Errorf("peak %d goroutines, %d above the baseline %d: want the load bounded by Concurrency %d", peak.Load(), extra, base, concurrency)
	}
	for _, row := range res.Rows {
		if row.Sold != 10 || row.Oversold != 0 || row.Verdict != drill.VerdictClean || row.Errors != 0 || row.SoldOut+row.Busy != buyers-10 {
			t.Errorf("%s: %+v", row.Strategy, row)
		}
	}
}
