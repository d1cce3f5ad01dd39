package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/inventory"
)

// SeckillHTTP runs the flash sale against running `dlock serve` processes
// (the replicas): buyers POST /orders to targets chosen by seed, each once,
// for one unit of sku, at most concurrency at once (0: the default); the
// books come from the first target's /reconcile/{sku}. The sku must be on
// sale already (serve --stock).
func SeckillHTTP(ctx context.Context, targets []string, sku string, buyers, concurrency int, seed uint64, progress func(string, int, int)) (*SeckillResult, error) {
	if len(targets) == 0 || buyers < 1 || concurrency < 0 {
		return nil, fmt.Errorf("seckill: want at least one target and one buyer")
	}
	if concurrency == 0 {
		concurrency = DefaultSeckillConcurrency
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	var health struct {
		Strategy string `json:"strategy"`
		Database string `json:"database"`
	}
	if err := getJSON(ctx, hc, targets[0]+"/healthz", &health); err != nil {
		return nil, err
	}
	var rep inventory.Report
	if err := getJSON(ctx, hc, targets[0]+"/reconcile/"+sku, &rep); err != nil {
		return nil, err
	}
	stock := rep.Qty
	row := SeckillRow{Strategy: health.Strategy, Buyers: buyers, Stock: int(stock)}
	rng := rand.New(rand.NewPCG(seed, 0x5eccc1))
	serve := make([]int32, buyers)
	for i := range serve {
		serve[i] = int32(rng.IntN(len(targets)))
	}
	run := randomID()
	lat := make([]time.Duration, buyers)
	status := make([]int, buyers)
	var done, next atomic.Int64
	hc.Transport = &http.Transport{MaxIdleConnsPerHost: concurrency, MaxConnsPerHost: concurrency}
	defer hc.CloseIdleConnections()
	buy := func(i int) {
		body, _ := json.Marshal(map[string]any{"sku": sku, "qty": 1, "buyer": fmt.Sprintf("buyer-%d", i), "request_id": fmt.Sprintf("%s-%d", run, i)})
		t0 := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, targets[serve[i]]+"/orders", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		lat[i] = time.Since(t0)
		if err == nil {
			status[i] = resp.StatusCode
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		if progress != nil {
			progress(row.Strategy, int(done.Add(1)), buyers)
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range min(concurrency, buyers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= buyers {
					return
				}
				buy(i)
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	for _, s := range status {
		switch s {
		case http.StatusCreated:
		case http.StatusConflict:
			row.SoldOut++
		case http.StatusTooManyRequests:
			row.Busy++
		default:
			row.Errors++
		}
	}
	slices.Sort(lat)
	row.P50MS, row.P99MS = msf(pct(lat, 50)), msf(pct(lat, 99))
	row.OrdersPerSec = float64(buyers) / elapsed.Seconds()
	if err := getJSON(ctx, hc, targets[0]+"/reconcile/"+sku, &rep); err != nil {
		return nil, err
	}
	row.Sold, row.Oversold, row.FinalStock = rep.Units, rep.Oversold, rep.Qty
	row.ReconcileClean, row.Problems = rep.Clean(), rep.Problems
	if turnedAway := row.Busy + row.Errors; rep.Qty > 0 && turnedAway > 0 {
		row.Unsold = rep.Qty
		row.Problems = append(row.Problems, fmt.Sprintf("left %d of %d units unsold while turning %d buyers away (%d busy, %d errors)",
			rep.Qty, stock, turnedAway, row.Busy, row.Errors))
	}
	row.Verdict = verdict(row)
	row.LeakedLockKeys = -1 // not visible from outside
	return &SeckillResult{Redis: "used by the targets", Database: health.Database + " (used by the targets)",
		Replicas: len(targets), Rows: []SeckillRow{row}}, nil
}

func getJSON(ctx context.Context, hc *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnreachable, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, v)
}
