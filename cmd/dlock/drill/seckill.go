package drill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/observe"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/cmd/dlock/table"
)

// SeckillOptions configure a flash sale.
type SeckillOptions struct {
	Buyers int // buyers, one purchase of one unit each
	Stock  int // units on sale
	// Concurrency bounds the buyers in flight at once (default
	// DefaultSeckillConcurrency): a buyer is one request, and a worker
	// takes the next buyer when its request ends, so memory does not grow
	// with Buyers.
	Concurrency int
	// Keep leaves each strategy's sku, its orders, idempotency rows and
	// Redis keys where the run made them; by default they are removed
	// once the row is measured (a temp SQLite is removed anyway).
	Keep       bool
	Replicas   int      // simulated service replicas, each its own Redis client, lock client and DB pool
	Strategies []string // inventory strategy names; empty: all
	DSN        string   // database; "" is SQLite in a temp dir
	Seed       uint64   // seeds which replica serves which buyer
	// Observer, when set, is given to every replica's lock client (metrics).
	Observer observe.Observer
	// Locks, when set, is the lock service of the lock and fenced
	// strategies (etcd, ZooKeeper); nil: the Redis.
	Locks *backend.Backend
	// Progress, when set, is called after every finished purchase.
	Progress func(strategy string, done, total int)
}

// DefaultSeckillConcurrency is the default of SeckillOptions.Concurrency.
const DefaultSeckillConcurrency = 128

// Verdicts of a SeckillRow.
const (
	VerdictClean    = "clean"    // the books reconcile and every unit sold, or every buyer was served
	VerdictUnsold   = "UNSOLD"   // units left while buyers were turned away (busy or errors)
	VerdictProblems = "PROBLEMS" // the books do not reconcile (oversold, lost units, …)
)

// SeckillRow is one strategy's flash sale.
type SeckillRow struct {
	Strategy            string  `json:"strategy"`
	Buyers              int     `json:"buyers"`
	Stock               int     `json:"stock"`
	Sold                int64   `json:"sold"`
	Oversold            int64   `json:"oversold"`
	FinalStock          int64   `json:"final_stock"`
	LeakedLockKeys      int     `json:"leaked_lock_keys"`
	OrdersPerSec        float64 `json:"orders_per_sec"`
	P50MS               float64 `json:"p50_ms"`
	P99MS               float64 `json:"p99_ms"`
	SoldOut             int     `json:"sold_out"`
	Busy                int     `json:"busy"`
	Errors              int     `json:"errors"`
	StaleWritesRejected int64   `json:"stale_writes_rejected"`
	ReconcileClean      bool    `json:"reconcile_clean"`
	// Unsold counts the units left unsold although buyers were turned away.
	Unsold   int64    `json:"unsold"`
	Verdict  string   `json:"verdict"`
	Problems []string `json:"problems,omitempty"`
}

// SeckillResult is a whole run.
type SeckillResult struct {
	Redis    string       `json:"redis"`
	Database string       `json:"database"`
	Replicas int          `json:"replicas"`
	Rows     []SeckillRow `json:"rows"`
	// Leftovers says what the run left in a database or Redis the user
	// gave, and why, or what it removed; empty when there was nothing to
	// say (a temp database and an embedded Redis).
	Leftovers string `json:"leftovers,omitempty"`
}

// Seckill runs the flash sale of 002 §4.5 for every strategy: Buyers buyers
// at once for Stock units of a fresh sku, spread over Replicas replicas that
// share nothing but Redis and the database (so an in-process mutex could
// not help), then reconciles the books and looks for lock keys left behind.
func Seckill(ctx context.Context, r *backend.Backend, o SeckillOptions) (*SeckillResult, error) {
	if o.Buyers < 1 || o.Stock < 0 || o.Replicas < 1 || o.Concurrency < 0 {
		return nil, errors.New("seckill: buyers and replicas must be >= 1, stock and concurrency >= 0")
	}
	if o.Concurrency == 0 {
		o.Concurrency = DefaultSeckillConcurrency
	}
	names := o.Strategies
	if len(names) == 0 {
		names = inventory.Names
	}
	for _, n := range names {
		if !slices.Contains(inventory.Names, n) {
			return nil, fmt.Errorf("seckill: unknown strategy %q (want one of %s)", n, strings.Join(inventory.Names, ", "))
		}
	}
	dsn, dbKind := o.DSN, "database at "+o.DSN
	if dsn == "" {
		dir, err := os.MkdirTemp("", "dlock-seckill-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		dsn, dbKind = "sqlite:"+filepath.Join(dir, "shop.db"), "sqlite (temp dir, removed at exit)"
	}
	res := &SeckillResult{Redis: r.Desc, Database: dbKind, Replicas: o.Replicas}
	var skus []string
	for _, n := range names {
		sku := "sk-" + n + "-" + randomID()
		row, err := sale(ctx, r, dsn, n, sku, o)
		if err != nil {
			return nil, fmt.Errorf("seckill %s: %w", n, err)
		}
		res.Rows = append(res.Rows, row)
		skus = append(skus, sku)
	}
	res.Leftovers = leftovers(o, r, skus)
	return res, nil
}

// leftovers says what the run did with the rows and keys it made in the
// servers the user gave.
func leftovers(o SeckillOptions, r *backend.Backend, skus []string) string {
	var where []string
	if o.DSN != "" {
		where = append(where, "the database")
	}
	if !r.Embedded { // the user's Redis
		where = append(where, "Redis")
	}
	if len(where) == 0 {
		return ""
	}
	list := strings.Join(skus, ", ")
	if !o.Keep {
		return "removed from " + strings.Join(where, " and ") + " what the run made for skus " + list +
			" (stock rows, orders, idempotency rows, Redis keys); --keep leaves them"
	}
	return "left, as --keep asks: in the database the stock rows of skus " + list +
		", their orders and the idempotency rows buy:<sku>-req-<n>; in Redis the keys " +
		inventory.DefaultRedisPrefix + "{<sku>}:* (and dlock's fence counters, " + dlock.DefaultPrefix + "fence:{<tag>}, one per hash slot)"
}

// replica is one simulated service instance.
type replica struct {
	rdb      *redis.Client
	locks    *dlock.Client
	lockc    backend.Client // o.Locks's client, if any
	store    inventory.Store
	strategy inventory.Strategy
	consumer *inventory.Consumer
}

func (p *replica) close() {
	if p.locks != nil {
		_ = p.locks.Close()
	}
	if p.lockc != nil {
		_ = p.lockc.Close()
	}
	if p.store != nil {
		_ = p.store.Close()
	}
	_ = p.rdb.Close()
}

// sale sells sku, a fresh sku, through the strategy name and measures the
// row.
func sale(ctx context.Context, r *backend.Backend, dsn, name, sku string, o SeckillOptions) (SeckillRow, error) {
	row := SeckillRow{Strategy: name, Buyers: o.Buyers, Stock: o.Stock}
	reps := make([]*replica, o.Replicas)
	defer func() {
		for _, p := range reps {
			if p != nil {
				p.close()
			}
		}
	}()
	for i := range reps {
		rdb, err := r.RedisClient()
		if err != nil {
			return row, err
		}
		p := &replica{rdb: rdb}
		reps[i] = p
		if p.locks, err = dlock.New(rdb, dlock.Config{Label: fmt.Sprintf("replica-%d", i), Observer: o.Observer}); err != nil {
			return row, err
		}
		if p.store, err = inventory.Open(ctx, dsn); err != nil {
			return row, err
		}
		deps := inventory.Deps{Store: p.store, Locks: p.locks, Redis: rdb}
		if o.Locks != nil {
			if p.lockc, err = o.Locks.NewClient(ctx, backend.ClientOptions{Label: fmt.Sprintf("replica-%d", i), Observer: o.Observer}); err != nil {
				return row, err
			}
			deps.Lockers = p.lockc
		}
		if p.strategy, err = inventory.New(name, deps, inventory.Options{}); err != nil {
			return row, err
		}
	}
	if _, err := reps[0].store.AddSKU(ctx, sku, int64(o.Stock)); err != nil {
		return row, err
	}
	cctx, stopConsumers := context.WithCancel(ctx)
	var consumers sync.WaitGroup
	defer func() { stopConsumers(); consumers.Wait() }()
	if pre, ok := reps[0].strategy.(*inventory.Prededuct); ok {
		if _, err := pre.WarmUp(ctx, sku); err != nil {
			return row, err
		}
		for i, p := range reps {
			p.consumer = p.strategy.(*inventory.Prededuct).NewConsumer(inventory.ConsumerOptions{
				Name: fmt.Sprintf("replica-%d", i), Block: 50 * time.Millisecond,
			})
			consumers.Add(1)
			go func() { defer consumers.Done(); _ = p.consumer.Run(cctx, sku) }()
		}
	}

	serve := serveOrder(o.Seed, o.Buyers, o.Replicas)
	lat := make([]time.Duration, o.Buyers)
	outcome := make([]inventory.Outcome, o.Buyers)
	var (
		done      atomic.Int64
		firstMu   sync.Mutex
		firstErr  error
		firstBusy string
	)
	buy := func(i int) {
		t0 := time.Now()
		res, err := reps[serve[i]].strategy.Buy(ctx, sku, 1, "buyer-"+strconv.Itoa(i), sku+"-req-"+strconv.Itoa(i))
		lat[i] = time.Since(t0)
		outcome[i] = res.Outcome
		if err != nil || res.Outcome == inventory.Busy {
			if err != nil {
				outcome[i] = inventory.Failed
			}
			firstMu.Lock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if res.Outcome == inventory.Busy && firstBusy == "" {
				firstBusy = res.Reason
			}
			firstMu.Unlock()
		}
		n := int(done.Add(1))
		if o.Progress != nil {
			o.Progress(name, n, o.Buyers)
		}
	}
	elapsed := runBuyers(ctx, o.Buyers, o.Concurrency, buy)
	if err := ctx.Err(); err != nil {
		return row, err
	}

	if reps[0].consumer != nil { // graceful stop: each flushes its own, then drain the rest
		stopConsumers()
		consumers.Wait()
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		for _, p := range reps {
			if err := p.consumer.Flush(dctx, sku); err != nil {
				return row, err
			}
		}
		if err := reps[0].consumer.Drain(dctx, sku); err != nil {
			return row, err
		}
	}
	for _, oc := range outcome {
		switch oc {
		case inventory.SoldOut:
			row.SoldOut++
		case inventory.Busy:
			row.Busy++
		case inventory.Failed:
			row.Errors++
		}
	}
	rep, err := reps[0].strategy.Reconcile(ctx, sku)
	if err != nil {
		return row, err
	}
	for _, p := range reps {
		if f, ok := p.strategy.(interface{ Rejected() int64 }); ok {
			row.StaleWritesRejected += f.Rejected()
		}
	}
	var detail string
	if row.Busy > 0 {
		detail += fmt.Sprintf("; %d busy (%s)", row.Busy, firstBusy)
	}
	if row.Errors > 0 {
		detail += fmt.Sprintf("; %d errors, the first: %v", row.Errors, firstErr)
	}
	row.measure(lat, elapsed, rep, detail)
	if row.LeakedLockKeys, err = leakedLockKeys(ctx, reps[0].rdb, inventory.LockName(sku)); err != nil {
		return row, err
	}
	if !o.Keep {
		err = removeSale(ctx, reps[0], sku)
	}
	return row, err
}

// removeSale removes what the sale of sku left: its rows in the database,
// prededuct's keys and the lock's keys. The fence counter of the lock's
// hash slot stays: it serves every lock name of that slot (at most 16384
// such keys in all).
func removeSale(ctx context.Context, p *replica, sku string) error {
	if _, err := inventory.RemoveSKU(ctx, p.store, sku, sku+"-req-"); err != nil {
		return err
	}
	if pre, ok := p.strategy.(*inventory.Prededuct); ok {
		if err := pre.RemoveKeys(ctx, sku); err != nil {
			return err
		}
	}
	iter := p.rdb.Scan(ctx, 0, dlock.DefaultPrefix+"{"+inventory.LockName(sku)+"}*", 100).Iterator()
	for iter.Next(ctx) {
		if err := p.rdb.Del(ctx, iter.Val()).Err(); err != nil {
			return fmt.Errorf("remove %s: %w", iter.Val(), err)
		}
	}
	return iter.Err()
}

// leakedLockKeys counts the keys of lock name still in Redis, with SCAN
// (its fence counter, one per hash slot, is another key).
func leakedLockKeys(ctx context.Context, rdb *redis.Client, name string) (int, error) {
	n := 0
	iter := rdb.Scan(ctx, 0, dlock.DefaultPrefix+"{"+name+"}*", 100).Iterator()
	for iter.Next(ctx) {
		n++
	}
	return n, iter.Err()
}

// Summary returns what the text shows: one row per strategy, the
// problems below it, and what the run left behind.
func (r *SeckillResult) Summary() *Summary {
	t := table.Of([]table.Column[SeckillRow]{
		table.Col("strategy", func(x SeckillRow) string { return x.Strategy }),
		table.Col("buyers", func(x SeckillRow) string { return strconv.Itoa(x.Buyers) }),
		table.Col("stock", func(x SeckillRow) string { return strconv.Itoa(x.Stock) }),
		table.Col("sold", func(x SeckillRow) string { return strconv.FormatInt(x.Sold, 10) }),
		table.Col("oversold", func(x SeckillRow) string { return strconv.FormatInt(x.Oversold, 10) }),
		table.Col("final stock", func(x SeckillRow) string { return strconv.FormatInt(x.FinalStock, 10) }),
		table.Col("leaked lock keys", func(x SeckillRow) string {
			if x.LeakedLockKeys < 0 {
				return "-" // not visible from outside
			}
			return strconv.Itoa(x.LeakedLockKeys)
		}),
		table.Col("orders/s", func(x SeckillRow) string { return fmt.Sprintf("%.0f", x.OrdersPerSec) }),
		table.Col("p50 ms", func(x SeckillRow) string { return fmt.Sprintf("%.1f", x.P50MS) }),
		table.Col("p99 ms", func(x SeckillRow) string { return fmt.Sprintf("%.1f", x.P99MS) }),
		table.Col("sold out", func(x SeckillRow) string { return strconv.Itoa(x.SoldOut) }),
		table.Col("busy", func(x SeckillRow) string { return strconv.Itoa(x.Busy) }),
		table.Col("errors", func(x SeckillRow) string { return strconv.Itoa(x.Errors) }),
		table.Col("stale writes rejected", func(x SeckillRow) string { return strconv.FormatInt(x.StaleWritesRejected, 10) }),
		table.Col("verdict", verdict),
	}, r.Rows)
	for _, x := range r.Rows {
		for _, p := range x.Problems {
			t.Notes = append(t.Notes, "  "+x.Strategy+": "+p)
		}
	}
	s := &Summary{Tables: []table.Table{t}}
	if r.Leftovers != "" {
		s.Notes = []string{r.Leftovers}
	}
	return s
}

// verdict is the row's verdict, computed for rows made without one.
func verdict(x SeckillRow) string {
	switch {
	case x.Verdict != "":
		return x.Verdict
	case !x.ReconcileClean:
		return VerdictProblems
	case x.Unsold > 0:
		return VerdictUnsold
	}
	return VerdictClean
}
