package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	dl "github.com/dlockgo/dlock" // dl: "dlock" is taken by the tests' helper
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/fence"
	"github.com/redis/go-redis/v9"
)

// retryAfter is the Retry-After of 429 and 503 answers, in seconds.
const retryAfter = "1"

// shop is what the HTTP handler serves.
type shop struct {
	strategy  inventory.Strategy
	store     inventory.Store
	rdb       redis.UniversalClient
	prededuct *inventory.Prededuct // nil unless the strategy is prededuct
	maxBody   int64
	metrics   *shopMetrics // nil: not counted
}

// routes are the shop's paths and the methods each allows.
var routes = []struct{ path, allow string }{
	{"/orders", "POST"},
	{"/stock/{sku}", "GET, HEAD"},
	{"/reconcile/{sku}", "GET, HEAD"},
	{"/healthz", "GET, HEAD"},
	{"/metrics", "GET, HEAD"},
}

// newShopHandler returns the shop's routes; metrics, if not nil, is mounted
// at GET /metrics. Every answer is JSON but /metrics': a known path with
// another method is 405 with Allow, an unknown path 404.
func newShopHandler(s shop, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", s.postOrder)
	mux.HandleFunc("GET /stock/{sku}", s.getStock)
	mux.HandleFunc("GET /reconcile/{sku}", s.getReconcile)
	mux.HandleFunc("GET /healthz", s.healthz)
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	for _, rt := range routes {
		if rt.path == "/metrics" && metrics == nil {
			continue
		}
		allow := rt.allow
		mux.HandleFunc(rt.path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeHTTPError(w, http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" "+r.URL.Path+": allowed "+allow)
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// orderResponse is the answer to POST /orders.
type orderResponse struct {
	Outcome   inventory.Outcome `json:"outcome"`
	SKU       string            `json:"sku"`
	Qty       int64             `json:"qty"`
	Buyer     string            `json:"buyer"`
	RequestID string            `json:"request_id"`
	OrderID   int64             `json:"order_id,omitempty"`
	Left      *int64            `json:"left,omitempty"`
	Queued    bool              `json:"queued,omitempty"`
	Replayed  bool              `json:"replayed,omitempty"`
	LeaseLost bool              `json:"lease_lost,omitempty"`
	Reason    string            `json:"reason,omitempty"`
}

func (s shop) postOrder(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req, berr := readOrder(w, r, s.maxBody)
	if berr != nil {
		s.metrics.observe(berr.code, time.Since(start))
		writeHTTPError(w, berr.status, berr.code, berr.msg)
		return
	}
	res, err := s.strategy.Buy(r.Context(), req.SKU, req.Qty, req.Buyer, req.RequestID)
	if err != nil {
		status, code := errorStatus(err)
		s.metrics.observe(code, time.Since(start))
		writeError(w, status, code, err)
		return
	}
	s.metrics.observe(string(res.Outcome), time.Since(start))
	resp := orderResponse{Outcome: res.Outcome, SKU: req.SKU, Qty: req.Qty, Buyer: req.Buyer, RequestID: req.RequestID,
		OrderID: res.OrderID, Queued: res.Queued, Replayed: res.Replayed, LeaseLost: res.LeaseLost, Reason: res.Reason}
	if res.Left >= 0 {
		resp.Left = &res.Left
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	status := http.StatusCreated
	switch res.Outcome {
	case inventory.SoldOut:
		status = http.StatusConflict
	case inventory.Busy:
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", retryAfter)
	}
	writeHTTPJSON(w, status, resp)
}

// errorStatus maps a Buy error to an HTTP status and an error code.
func errorStatus(err error) (int, string) {
	switch {
	case errors.Is(err, inventory.ErrInvalidInput):
		return http.StatusBadRequest, "invalid_input"
	case errors.Is(err, inventory.ErrUnknownSKU):
		return http.StatusBadRequest, "unknown_sku"
	case errors.Is(err, inventory.ErrLockLost):
		return http.StatusInternalServerError, "lock_lost_after_commit"
	case errors.Is(err, inventory.ErrNotPersisted):
		return http.StatusInternalServerError, "not_persisted"
	case inventory.IsUnavailable(err):
		return http.StatusServiceUnavailable, "unavailable"
	case errors.Is(err, inventory.ErrNotWarmedUp):
		return http.StatusServiceUnavailable, "not_warmed_up"
	case errors.Is(err, fence.ErrStale):
		return http.StatusServiceUnavailable, "stale_token"
	case errors.Is(err, dl.ErrLockLost):
		return http.StatusServiceUnavailable, "lock_lost"
	}
	return http.StatusInternalServerError, "internal"
}

// stockResponse is the answer to GET /stock/{sku}.
type stockResponse struct {
	inventory.Stock
	Orders   int64  `json:"orders"`
	Units    int64  `json:"units"`
	RedisQty *int64 `json:"redis_qty,omitempty"`
	// RedisMissing (prededuct): Redis has no stock for the sku (it lost its
	// data); the next order warms it up from the database.
	RedisMissing bool `json:"redis_missing,omitempty"`
}

func (s shop) getStock(w http.ResponseWriter, r *http.Request) {
	sku := r.PathValue("sku")
	st, err := s.store.Stock(r.Context(), sku)
	if err != nil {
		s.lookupError(w, err)
		return
	}
	resp := stockResponse{Stock: st}
	if resp.Orders, resp.Units, err = s.store.Orders(r.Context(), sku); err != nil {
		s.lookupError(w, err)
		return
	}
	if s.prededuct != nil {
		q, err := s.rdb.Get(r.Context(), s.prededuct.StockKey(sku)).Int64()
		switch {
		case err == nil:
			resp.RedisQty = &q
		case errors.Is(err, redis.Nil):
			resp.RedisMissing = true
		default:
			s.lookupError(w, err)
			return
		}
	}
	writeHTTPJSON(w, http.StatusOK, resp)
}

func (s shop) getReconcile(w http.ResponseWriter, r *http.Request) {
	rep, err := s.strategy.Reconcile(r.Context(), r.PathValue("sku"))
	if err != nil {
		s.lookupError(w, err)
		return
	}
	writeHTTPJSON(w, http.StatusOK, rep)
}

func (s shop) lookupError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, inventory.ErrInvalidInput):
		writeHTTPError(w, http.StatusBadRequest, "invalid_input", err.Error())
	case errors.Is(err, inventory.ErrUnknownSKU):
		writeHTTPError(w, http.StatusNotFound, "unknown_sku", err.Error())
	case inventory.IsUnavailable(err):
		writeError(w, http.StatusServiceUnavailable, "unavailable", err)
	default:
		writeHTTPError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

// healthz answers 200 when what the strategy needs answers: the database
// always; Redis for lock, fenced and prededuct; and for prededuct the stock
// of every sku in Redis (warmed up again here if Redis lost it). Otherwise
// 503 with Retry-After and the problems. The body lists every check.
func (s shop) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	var mu sync.Mutex
	checks := map[string]string{}
	problems := map[string]string{}
	var wg sync.WaitGroup
	check := func(name string, f func() (string, error)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			note, err := f()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				problems[name] = err.Error()
				checks[name] = "failing"
				return
			}
			checks[name] = note
		}()
	}
	if !needsRedis(s.strategy.Name()) {
		checks["redis"] = "not needed by " + s.strategy.Name()
	}
	check("database", func() (string, error) { return "ok", s.store.Ping(ctx) })
	if needsRedis(s.strategy.Name()) {
		check("redis", func() (string, error) {
			if err := s.rdb.Ping(ctx).Err(); err != nil {
				return "", err
			}
			if s.prededuct == nil {
				return "ok", nil
			}
			return s.warmStock(ctx)
		})
	}
	wg.Wait()
	body := map[string]any{"strategy": s.strategy.Name(), "database": s.store.Kind(), "checks": checks}
	if len(problems) > 0 {
		body["status"], body["problems"] = "unavailable", problems
		w.Header().Set("Retry-After", retryAfter)
		writeHTTPJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	body["status"] = "ok"
	writeHTTPJSON(w, http.StatusOK, body)
}

// warmStock checks that Redis has the stock of every sku, warming up from
// the database those it lost; it says which it warmed up.
func (s shop) warmStock(ctx context.Context) (string, error) {
	skus, err := s.store.SKUs(ctx)
	if err != nil {
		return "", err
	}
	var warmed []string
	for _, sku := range skus {
		ok, err := s.prededuct.EnsureWarm(ctx, sku)
		if err != nil {
			return "", err
		}
		if ok {
			warmed = append(warmed, sku)
		}
	}
	if len(warmed) > 0 {
		return "ok; stock warmed up again from the database (Redis had lost it): " + strings.Join(warmed, ", "), nil
	}
	return "ok", nil
}

func writeHTTPJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errorBody is every error response.
type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeHTTPError(w http.ResponseWriter, status int, code, msg string) {
	writeHTTPJSON(w, status, errorBody{Error: msg, Code: code})
}

// writeError writes err, with Retry-After on a 503.
func writeError(w http.ResponseWriter, status int, code string, err error) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", retryAfter)
	}
	writeHTTPError(w, status, code, err.Error())
}
