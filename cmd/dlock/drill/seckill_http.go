package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
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
	serve := serveOrder(seed, buyers, len(targets))
	run := randomID()
	lat := make([]time.Duration, buyers)
	status := make([]int, buyers)
	var done atomic.Int64
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
	elapsed := runBuyers(ctx, buyers, concurrency, buy)
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
	if err := getJSON(ctx, hc, targets[0]+"/reconcile/"+sku, &rep); err != nil {
		return nil, err
	}
	row.measure(lat, elapsed, rep, fmt.Sprintf(" (%d busy, %d errors)", row.Busy, row.Errors))
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
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("GET %q: %w: %s", url, backend.ErrUnreachable, backend.Cause(err, url))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %q: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.Unmarshal(b, v)
}
