package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	dl "github.com/dlockgo/dlock" // dl: "dlock" is taken by the tests' helper
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/fence"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
)

// serveConfig is the command line of dlock serve.
type serveConfig struct {
	listen    string
	strategy  string
	redisURL  string
	db        string
	stock     []string // SKU=QTY
	maxBody   int64
	maxQty    int64
	wait      time.Duration
	lease     time.Duration
	claimIdle time.Duration
	shutdown  time.Duration
}

func newServeCmd() *cobra.Command {
	var cfg serveConfig
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the flash-sale shop over HTTP (POST /orders, GET /stock/{sku}, GET /healthz, GET /metrics)",
		Long: `Serve the flash-sale shop over HTTP with one of the inventory strategies.

  POST /orders          {"sku","qty","buyer","request_id"} -> 201 sold, 409 sold out,
                        429 busy (Retry-After), 400 bad input; errors are JSON
  GET  /stock/{sku}     the stock row (and the Redis stock for prededuct)
  GET  /reconcile/{sku} the books of a sku (oversold, undersold, pending)
  GET  /healthz         200 when the database and Redis answer
  GET  /metrics         the lock signals as Prometheus metrics (package dlockprom)

Several serve processes on different ports against one Redis and one database
are the replicas of the articles: an in-process mutex would not protect them,
the strategies do. SIGINT/SIGTERM drain in-flight requests and the stream
consumer, then exit.`,
		Example: "  dlock serve --stock 1001=10\n" +
			"  dlock serve --strategy lock --listen 127.0.0.1:8081 --db postgres://postgres@127.0.0.1:5432/shop --redis redis://127.0.0.1:6379/0",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			obs, reg, err := newSignalRegistry()
			if err != nil {
				return err
			}
			metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
			return runServe(c.Context(), cfg, c.OutOrStdout(), metrics, dl.WithObserver(obs))
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.listen, "listen", "127.0.0.1:8080", "address to listen on (port 0: any free port)")
	f.StringVar(&cfg.strategy, "strategy", "conditional", "one of "+strings.Join(inventory.Names, ", "))
	f.StringVar(&cfg.redisURL, "redis", "redis://127.0.0.1:6379/0", "Redis URL")
	f.StringVar(&cfg.db, "db", "sqlite:dlock-shop.db", "database: postgres://… or sqlite:PATH")
	f.StringArrayVar(&cfg.stock, "stock", nil, "SKU=QTY to put on sale if the sku does not exist yet (repeatable)")
	f.Int64Var(&cfg.maxBody, "max-body", 4096, "largest request body in bytes")
	f.Int64Var(&cfg.maxQty, "max-qty", inventory.DefaultMaxQty, "per-order limit")
	f.DurationVar(&cfg.wait, "wait", inventory.DefaultWait, "lock wait (lock, fenced); then 429")
	f.DurationVar(&cfg.lease, "lease", 0, "lock lease (lock, fenced); 0: the watchdog keeps it")
	f.DurationVar(&cfg.claimIdle, "claim-idle", inventory.DefaultClaimIdle, "prededuct: reclaim stream entries a dead consumer left pending this long")
	f.DurationVar(&cfg.shutdown, "shutdown-timeout", 15*time.Second, "how long a shutdown may take to drain")
	return c
}

// parseStock parses SKU=QTY flags.
func parseStock(specs []string) (map[string]int64, []string, error) {
	stock := map[string]int64{}
	var order []string
	for _, s := range specs {
		sku, q, ok := strings.Cut(s, "=")
		n, err := strconv.ParseInt(q, 10, 64)
		if !ok || err != nil || n < 0 || sku == "" {
			return nil, nil, usagef("--stock %q: want SKU=QTY with QTY >= 0", s)
		}
		if _, dup := stock[sku]; !dup {
			order = append(order, sku)
		}
		stock[sku] = n
	}
	return stock, order, nil
}

// runServe serves until ctx is done, then shuts down gracefully. metrics,
// if not nil, is served at GET /metrics; lockOpts configure the dlock
// Client (an observer, for instance).
func runServe(ctx context.Context, cfg serveConfig, out io.Writer, metrics http.Handler, lockOpts ...dl.ClientOption) error {
	if !isStrategy(inventory.Names, cfg.strategy) {
		return usagef("--strategy %q: want one of %s", cfg.strategy, strings.Join(inventory.Names, ", "))
	}
	if cfg.maxBody < 64 || cfg.maxQty < 1 || cfg.wait < 0 || cfg.lease < 0 || cfg.claimIdle <= 0 || cfg.shutdown <= 0 {
		return usagef("--max-body must be >= 64, --max-qty >= 1, --claim-idle and --shutdown-timeout > 0, --wait and --lease >= 0")
	}
	stock, skuOrder, err := parseStock(cfg.stock)
	if err != nil {
		return err
	}
	ropt, err := redis.ParseURL(cfg.redisURL)
	if err != nil {
		return usagef("--redis %q: %v", cfg.redisURL, err)
	}
	rdb := redis.NewClient(ropt)
	defer rdb.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = rdb.Ping(pctx).Err()
	cancel()
	if err != nil {
		return usagef("--redis %s: unreachable: %v", ropt.Addr, err)
	}
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	store, err := inventory.Open(octx, cfg.db)
	cancel()
	if err != nil {
		return usagef("--db: %v", err)
	}
	defer store.Close()
	locks, err := dl.New(rdb, append([]dl.ClientOption{dl.WithLabel("dlock serve " + cfg.listen)}, lockOpts...)...)
	if err != nil {
		return err
	}
	defer locks.Close()

	strat, err := inventory.New(cfg.strategy, inventory.Deps{Store: store, Locks: locks, Redis: rdb}, inventory.Options{
		MaxQty: cfg.maxQty, Wait: cfg.wait, Lease: cfg.lease,
	})
	if err != nil {
		return usagef("%v", err)
	}
	for _, sku := range skuOrder {
		if _, err := store.AddSKU(ctx, sku, stock[sku]); err != nil && !errors.Is(err, inventory.ErrExists) {
			return usagef("--stock %s=%d: %v", sku, stock[sku], err)
		}
	}

	// prededuct: warm up, and persist the stream while serving.
	pd, _ := strat.(*inventory.Prededuct)
	var consumer *inventory.Consumer
	var skus []string
	consumerDone := make(chan struct{})
	cctx, stopConsumer := context.WithCancel(context.WithoutCancel(ctx))
	defer stopConsumer()
	if pd != nil {
		if skus, err = pd.WarmUpAll(ctx); err != nil {
			return err
		}
		consumer = pd.NewConsumer(inventory.ConsumerOptions{ClaimIdle: cfg.claimIdle})
		go func() {
			defer close(consumerDone)
			_ = consumer.Run(cctx, skus...)
		}()
	} else {
		close(consumerDone)
	}

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		stopConsumer()
		<-consumerDone
		return usagef("--listen %s: %v", cfg.listen, err)
	}
	srv := &http.Server{
		Handler:           newShopHandler(shop{strategy: strat, store: store, rdb: rdb, prededuct: pd, maxBody: cfg.maxBody}, metrics),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	fmt.Fprintf(out, "dlock serve: strategy %s, %s database, redis %s, listening on http://%s\n",
		strat.Name(), store.Kind(), ropt.Addr, ln.Addr())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	// Graceful shutdown: stop accepting, let in-flight requests finish,
	// then stop the consumer and persist what it holds.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdown)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	if serveErr == nil {
		<-served
	}
	stopConsumer()
	<-consumerDone
	if consumer != nil {
		shutErr = errors.Join(shutErr, consumer.Flush(sctx, skus...))
		st := consumer.Stats()
		fmt.Fprintf(out, "dlock serve: consumer persisted %d orders (%d redelivered, %d compensated)\n", st.Applied, st.Duplicates, st.Compensated)
	}
	fmt.Fprintln(out, "dlock serve: stopped")
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return shutErr
}

func isStrategy(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// shop is what the HTTP handler serves.
type shop struct {
	strategy  inventory.Strategy
	store     inventory.Store
	rdb       redis.UniversalClient
	prededuct *inventory.Prededuct // nil unless the strategy is prededuct
	maxBody   int64
}

// newShopHandler returns the shop's routes; metrics, if not nil, is mounted
// at GET /metrics.
func newShopHandler(s shop, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", s.postOrder)
	mux.HandleFunc("GET /stock/{sku}", s.getStock)
	mux.HandleFunc("GET /reconcile/{sku}", s.getReconcile)
	mux.HandleFunc("GET /healthz", s.healthz)
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeHTTPError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// orderRequest is the body of POST /orders.
type orderRequest struct {
	SKU       string `json:"sku"`
	Qty       int64  `json:"qty"`
	Buyer     string `json:"buyer"`
	RequestID string `json:"request_id"`
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
	var req orderRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeHTTPError(w, http.StatusBadRequest, "body_too_large", fmt.Sprintf("request body larger than %d bytes", s.maxBody))
			return
		}
		writeHTTPError(w, http.StatusBadRequest, "bad_json", "request body: "+err.Error())
		return
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		writeHTTPError(w, http.StatusBadRequest, "bad_json", "request body: one JSON object expected")
		return
	}
	res, err := s.strategy.Buy(r.Context(), req.SKU, req.Qty, req.Buyer, req.RequestID)
	if err != nil {
		status, code := errorStatus(err)
		if status == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeHTTPError(w, status, code, err.Error())
		return
	}
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
		w.Header().Set("Retry-After", "1")
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
	case errors.Is(err, inventory.ErrNotWarmedUp):
		return http.StatusServiceUnavailable, "not_warmed_up"
	case errors.Is(err, fence.ErrStale):
		return http.StatusServiceUnavailable, "stale_token"
	case errors.Is(err, inventory.ErrLockLost):
		return http.StatusInternalServerError, "lock_lost_after_commit"
	case errors.Is(err, dl.ErrLockLost):
		return http.StatusServiceUnavailable, "lock_lost"
	case errors.Is(err, inventory.ErrNotPersisted):
		return http.StatusInternalServerError, "not_persisted"
	}
	return http.StatusInternalServerError, "internal"
}

// stockResponse is the answer to GET /stock/{sku}.
type stockResponse struct {
	inventory.Stock
	Orders   int64  `json:"orders"`
	Units    int64  `json:"units"`
	RedisQty *int64 `json:"redis_qty,omitempty"`
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
		if q, err := s.rdb.Get(r.Context(), s.prededuct.StockKey(sku)).Int64(); err == nil {
			resp.RedisQty = &q
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
	default:
		writeHTTPError(w, http.StatusInternalServerError, "internal", err.Error())
	}
}

func (s shop) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	var mu sync.Mutex
	problems := map[string]string{}
	var wg sync.WaitGroup
	check := func(name string, f func() error) {
		defer wg.Done()
		if err := f(); err != nil {
			mu.Lock()
			problems[name] = err.Error()
			mu.Unlock()
		}
	}
	wg.Add(2)
	go check("database", func() error { return s.store.Ping(ctx) })
	go check("redis", func() error { return s.rdb.Ping(ctx).Err() })
	wg.Wait()
	if len(problems) > 0 {
		writeHTTPJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "problems": problems})
		return
	}
	writeHTTPJSON(w, http.StatusOK, map[string]string{"status": "ok", "strategy": s.strategy.Name(), "database": s.store.Kind()})
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
