package drill

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/inventory"
)

// How a flash sale's buyers are run, in process (Seckill) or against
// running servers (SeckillHTTP), and what their row reads from them.

// serveOrder returns, for each of n buyers, the replica (of replicas)
// that serves it, chosen by seed.
func serveOrder(seed uint64, n, replicas int) []int32 {
	rng := rand.New(rand.NewPCG(seed, 0x5eccc1))
	serve := make([]int32, n)
	for i := range serve {
		serve[i] = int32(rng.IntN(replicas))
	}
	return serve
}

// runBuyers runs buy(0) … buy(n-1), at most concurrency at once, all
// workers starting together (a worker takes the next buyer when its buy
// returns, so memory does not grow with n), and returns how long they
// took. Once ctx is done no buyer is started.
func runBuyers(ctx context.Context, n, concurrency int, buy func(i int)) time.Duration {
	var next atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range min(concurrency, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				buy(i)
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	return time.Since(t0)
}

// measure sets the row's latency and rate from the buyers' latencies and
// the sale's duration, its books from rep, and its verdict; units left
// while buyers were turned away (busy or errors) are a problem, which
// detail explains.
func (row *SeckillRow) measure(lat []time.Duration, elapsed time.Duration, rep inventory.Report, detail string) {
	slices.Sort(lat)
	row.P50MS, row.P99MS = msf(pct(lat, 50)), msf(pct(lat, 99))
	row.OrdersPerSec = float64(len(lat)) / elapsed.Seconds()
	row.Sold, row.Oversold, row.FinalStock = rep.Units, rep.Oversold, rep.Qty
	row.ReconcileClean, row.Problems = rep.Clean(), rep.Problems
	if turnedAway := row.Busy + row.Errors; rep.Qty > 0 && turnedAway > 0 {
		row.Unsold = rep.Qty
		row.Problems = append(row.Problems, fmt.Sprintf("left %d of %d units unsold while turning %d buyers away%s", rep.Qty, row.Stock, turnedAway, detail))
	} else if row.Errors > 0 && detail != "" {
		row.Problems = append(row.Problems, fmt.Sprintf("%d errors%s", row.Errors, detail))
	}
	row.Verdict = verdict(*row)
}
