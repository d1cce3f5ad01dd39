package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	dl "github.com/dlockgo/dlock" // dl: "dlock" is taken by the tests' helper
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
)

// serveConfig is the command line of dlock serve.
type serveConfig struct {
	listen    string
	strategy  string
	redisURL  string
	redisFrom string // where redisURL came from (flagSource)
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
                        429 busy (Retry-After), 400 bad input, 413 body too large,
                        503 Redis or the database unavailable (Retry-After); errors are JSON
                        {"error","code"}
  GET  /stock/{sku}     the stock row (and the Redis stock for prededuct)
  GET  /reconcile/{sku} the books of a sku (oversold, undersold, pending, redis_missing)
  GET  /healthz         200 when what the strategy needs answers: the database, and
                        Redis for lock, fenced and prededuct; 503 otherwise
  GET  /metrics         the shop's orders by result and latency, the lock signals
                        (package dlockprom), and the Go and process collectors

Several serve processes on different ports against one Redis and one database
are the replicas of the articles: an in-process mutex would not protect them,
the strategies do. With prededuct, a Redis that lost its data (restarted
empty) is warmed up again from the database by the next order, the health
check or the stream consumer, whichever comes first. SIGINT/SIGTERM drain
in-flight requests and the stream consumer, then exit.

Without --db the shop lives in SQLite at $XDG_DATA_HOME/dlock/shop.db
(~/.local/share/dlock/shop.db); serve prints the path it uses. --stock
puts a sku on sale only if it does not exist yet; for an existing sku it
says so on stderr and leaves the stock as it is.`,
		Example: "  dlock serve --stock 1001=10\n" +
			"  dlock serve --strategy lock --listen 127.0.0.1:8081 --db postgres://postgres@127.0.0.1:5432/shop --redis redis://127.0.0.1:6379/0",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cfg.redisFrom = flagSource(c, "redis")
			return runServe(c.Context(), cfg, c.OutOrStdout(), c.ErrOrStderr())
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.listen, "listen", "127.0.0.1:8080", "address to listen on (port 0: any free port)")
	f.StringVar(&cfg.strategy, "strategy", "conditional", "one of "+strings.Join(inventory.Names, ", "))
	f.StringVar(&cfg.redisURL, "redis", "redis://127.0.0.1:6379/0", "Redis URL (needed by lock, fenced and prededuct)")
	f.StringVar(&cfg.db, "db", "", "database: postgres://… or sqlite:PATH (default: SQLite in the user's data directory, printed at start)")
	f.StringArrayVar(&cfg.stock, "stock", nil, "SKU=QTY to put on sale if the sku does not exist yet (repeatable; an existing sku is left as it is, with a notice)")
	f.Int64Var(&cfg.maxBody, "max-body", 4096, "largest request body in bytes (larger: 413)")
	f.Int64Var(&cfg.maxQty, "max-qty", inventory.DefaultMaxQty, "per-order limit")
	f.DurationVar(&cfg.wait, "wait", inventory.DefaultWait, "lock wait (lock, fenced); then 429")
	f.DurationVar(&cfg.lease, "lease", 0, "lock lease (lock, fenced); 0: the watchdog keeps it")
	f.DurationVar(&cfg.claimIdle, "claim-idle", inventory.DefaultClaimIdle, "prededuct: reclaim stream entries a dead consumer left pending this long")
	f.DurationVar(&cfg.shutdown, "shutdown-timeout", 15*time.Second, "how long a shutdown may take to drain")
	allowZero(c, "lease", "the watchdog keeps it")
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

// needsRedis reports whether a strategy cannot sell without Redis.
func needsRedis(strategy string) bool {
	return strategy == "lock" || strategy == "fenced" || strategy == "prededuct"
}

// runServe serves until ctx is done, then shuts down gracefully. It writes
// what it does to out, notices (an ignored --stock) to errOut.
func runServe(ctx context.Context, cfg serveConfig, out, errOut io.Writer) error {
	if !isStrategy(inventory.Names, cfg.strategy) {
		return usagef("--strategy %q: want one of %s", cfg.strategy, strings.Join(inventory.Names, ", "))
	}
	if cfg.maxBody < 64 { // the flag layer refused zeros and negatives (checkFlags)
		return usagef("--max-body %d: want at least 64", cfg.maxBody)
	}
	stock, skuOrder, err := parseStock(cfg.stock)
	if err != nil {
		return err
	}
	rdb, err := backend.NewRedisClient(cfg.redisURL)
	if err != nil {
		return openError("redis", err)
	}
	defer rdb.Close()
	from := cfg.redisFrom
	if from == "" {
		from = "the default"
	}
	if needsRedis(cfg.strategy) { // the others start (and sell) without Redis
		if err := backend.PingRedis(ctx, rdb, cfg.redisURL); err != nil {
			return fmt.Errorf("strategy %s needs Redis: %w", cfg.strategy, err)
		}
	} else {
		from += "; not needed by strategy " + cfg.strategy
	}
	dsn := cfg.db
	if dsn == "" {
		if dsn, err = defaultShopDB(); err != nil {
			return err
		}
		fmt.Fprintf(out, "dlock serve: database %s (the default; choose one with --db)\n", dsn)
	}
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	store, err := inventory.Open(octx, dsn)
	cancel()
	if err != nil {
		return dbError(err)
	}
	defer store.Close()
	obs, reg, err := newSignalRegistry()
	if err != nil {
		return err
	}
	metrics, err := newShopMetrics(reg, cfg.strategy)
	if err != nil {
		return err
	}
	locks, err := dl.New(rdb, dl.Config{Label: "dlock serve " + cfg.listen, Observer: obs})
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
		if err := putOnSale(ctx, store, sku, stock[sku], errOut); err != nil {
			return err
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
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("--listen %s: %w", cfg.listen, err) // the address is fine, and taken: exit 1
		}
		return usagef("--listen %s: %v", cfg.listen, err)
	}
	sh := shop{strategy: strat, store: store, rdb: rdb, prededuct: pd, maxBody: cfg.maxBody, metrics: metrics}
	srv := &http.Server{
		Handler:           newShopHandler(sh, promhttp.HandlerFor(reg, promhttp.HandlerOpts{})),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	// Which Redis, on stderr, once the input is known to be good (the
	// errors above are one line each).
	fmt.Fprintln(errOut, serverLine(cfg.redisURL, from))
	fmt.Fprintf(out, "dlock serve: strategy %s, %s database, redis %s, listening on http://%s\n",
		strat.Name(), store.Kind(), backend.RedisServer(cfg.redisURL), ln.Addr())
	serveErr := serveUntilDone(ctx, srv, ln)
	// Graceful shutdown: stop accepting, let in-flight requests finish,
	// then stop the consumer and persist what it holds.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.shutdown)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
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

// serveUntilDone serves ln with srv until ctx ends, then returns nil (the
// caller shuts srv down), or until serving fails: its error.
func serveUntilDone(ctx context.Context, srv *http.Server, ln net.Listener) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		return nil
	case err := <-served:
		return err
	}
}

// putOnSale creates a sku with qty units; for a sku that exists it changes
// nothing and says so on errOut, with what the database holds.
func putOnSale(ctx context.Context, store inventory.Store, sku string, qty int64, errOut io.Writer) error {
	created, err := store.AddSKU(ctx, sku, qty)
	if errors.Is(err, inventory.ErrInvalidInput) {
		return usagef("--stock %s=%d: %v", sku, qty, err)
	}
	if err != nil && !errors.Is(err, inventory.ErrExists) {
		return fmt.Errorf("--stock %s=%d: %w", sku, qty, err)
	}
	if created {
		return nil
	}
	st, err := store.Stock(ctx, sku)
	if err != nil {
		return fmt.Errorf("--stock %s=%d: %w", sku, qty, err)
	}
	fmt.Fprintf(errOut, "dlock serve: --stock %s=%d ignored: sku %s exists in this database (put on sale with %d, %d left); "+
		"the stock is left as it is (use another --db for a fresh sale)\n", sku, qty, sku, st.Initial, st.Qty)
	return nil
}

// defaultShopDB returns the DSN of the default SQLite shop,
// $XDG_DATA_HOME/dlock/shop.db (~/.local/share/dlock/shop.db), or one in the
// temp dir when there is no home, creating its directory.
func defaultShopDB() (string, error) {
	base := os.Getenv("XDG_DATA_HOME")
	if base == "" || !filepath.IsAbs(base) {
		if home, err := os.UserHomeDir(); err == nil && home != "" {
			base = filepath.Join(home, ".local", "share")
		} else {
			base = os.TempDir()
		}
	}
	dir := filepath.Join(base, "dlock")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("default database directory: %w", err)
	}
	return "sqlite:" + filepath.Join(dir, "shop.db"), nil
}

func isStrategy(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
