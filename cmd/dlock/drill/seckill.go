package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/redis/go-redis/v9"
)

// SeckillOptions configure a flash sale.
type SeckillOptions struct {
	Buyers     int      // concurrent buyers, one purchase of one unit each
	Stock      int      // units on sale
	Replicas   int      // simulated service replicas, each its own Redis client, lock client and DB pool
	Strategies []string // inventory strategy names; empty: all
	DSN        string   // database; "" is SQLite in a temp dir
	Seed       uint64   // seeds which replica serves which buyer
	// Observer, when set, is given to every replica's lock client (metrics).
	Observer dlock.Observer
	// Progress, when set, is called after every finished purchase.
	Progress func(strategy string, done, total int)
}

// SeckillRow is one strategy's flash sale.
type SeckillRow struct {
	Strategy            string   `json:"strategy"`
	Buyers              int      `json:"buyers"`
	Stock               int      `json:"stock"`
	Sold                int64    `json:"sold"`
	Oversold            int64    `json:"oversold"`
	FinalStock          int64    `json:"final_stock"`
	LeakedLockKeys      int      `json:"leaked_lock_keys"`
	OrdersPerSec        float64  `json:"orders_per_sec"`
	P50MS               float64  `json:"p50_ms"`
	P99MS               float64  `json:"p99_ms"`
	SoldOut             int      `json:"sold_out"`
	Busy                int      `json:"busy"`
	Errors              int      `json:"errors"`
	StaleWritesRejected int64    `json:"stale_writes_rejected"`
	ReconcileClean      bool     `json:"reconcile_clean"`
	Problems            []string `json:"problems,omitempty"`
}

// SeckillResult is a whole run.
type SeckillResult struct {
	Redis    string       `json:"redis"`
	Database string       `json:"database"`
	Replicas int          `json:"replicas"`
	Rows     []SeckillRow `json:"rows"`
}

// Seckill runs the flash sale of 002 §4.5 for every strategy: Buyers buyers
// at once for Stock units of a fresh sku, spread over Replicas replicas that
// share nothing but Redis and the database (so an in-process mutex could
// not help), then reconciles the books and looks for lock keys left behind.
func Seckill(ctx context.Context, r *Redis, o SeckillOptions) (*SeckillResult, error) {
	if o.Buyers < 1 || o.Stock < 0 || o.Replicas < 1 {
		return nil, errors.New("seckill: buyers and replicas must be >= 1, stock >= 0")
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
	res := &SeckillResult{Redis: r.Kind, Database: dbKind, Replicas: o.Replicas}
	for _, n := range names {
		row, err := sale(ctx, r, dsn, n, o)
		if err != nil {
			return nil, fmt.Errorf("seckill %s: %w", n, err)
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// replica is one simulated service instance.
type replica struct {
	rdb      *redis.Client
	locks    *dlock.Client
	store    inventory.Store
	strategy inventory.Strategy
	consumer *inventory.Consumer
}

func (p *replica) close() {
	if p.locks != nil {
		_ = p.locks.Close()
	}
	if p.store != nil {
		_ = p.store.Close()
	}
	_ = p.rdb.Close()
}

func sale(ctx context.Context, r *Redis, dsn, name string, o SeckillOptions) (SeckillRow, error) {
	row := SeckillRow{Strategy: name, Buyers: o.Buyers, Stock: o.Stock}
	sku := "sk-" + name + "-" + randomID()
	reps := make([]*replica, o.Replicas)
	defer func() {
		for _, p := range reps {
			if p != nil {
				p.close()
			}
		}
	}()
	for i := range reps {
		rdb, err := r.Client()
		if err != nil {
			return row, err
		}
		p := &replica{rdb: rdb}
		reps[i] = p
		opts := []dlock.ClientOption{dlock.WithLabel(fmt.Sprintf("replica-%d", i))}
		if o.Observer != nil {
			opts = append(opts, dlock.WithObserver(o.Observer))
		}
		if p.locks, err = dlock.New(rdb, opts...); err != nil {
			return row, err
		}
		if p.store, err = inventory.Open(ctx, dsn); err != nil {
			return row, err
		}
		if p.strategy, err = inventory.New(name, inventory.Deps{Store: p.store, Locks: p.locks, Redis: rdb}, inventory.Options{}); err != nil {
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

	rng := rand.New(rand.NewPCG(o.Seed, 0x5eccc1))
	serve := make([]int, o.Buyers)
	for i := range serve {
		serve[i] = rng.IntN(o.Replicas)
	}
	lat := make([]time.Duration, o.Buyers)
	outcome := make([]inventory.Outcome, o.Buyers)
	var done atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < o.Buyers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			t0 := time.Now()
			res, err := reps[serve[i]].strategy.Buy(ctx, sku, 1, fmt.Sprintf("buyer-%d", i), fmt.Sprintf("%s-req-%d", sku, i))
			lat[i] = time.Since(t0)
			outcome[i] = res.Outcome
			if err != nil {
				outcome[i] = inventory.Failed
			}
			n := int(done.Add(1))
			if o.Progress != nil {
				o.Progress(name, n, o.Buyers)
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
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
	for i, oc := range outcome {
		switch oc {
		case inventory.SoldOut:
			row.SoldOut++
		case inventory.Busy:
			row.Busy++
		case inventory.Failed:
			row.Errors++
		}
		_ = i
	}
	slices.Sort(lat)
	row.P50MS, row.P99MS = msf(pct(lat, 50)), msf(pct(lat, 99))
	row.OrdersPerSec = float64(o.Buyers) / elapsed.Seconds()
	rep, err := reps[0].strategy.Reconcile(ctx, sku)
	if err != nil {
		return row, err
	}
	row.Sold, row.Oversold, row.FinalStock = rep.Units, rep.Oversold, rep.Qty
	row.ReconcileClean, row.Problems = rep.Clean(), rep.Problems
	for _, p := range reps {
		if f, ok := p.strategy.(interface{ Rejected() int64 }); ok {
			row.StaleWritesRejected += f.Rejected()
		}
	}
	row.LeakedLockKeys, err = leakedLockKeys(ctx, reps[0].rdb, inventory.LockName(sku))
	return row, err
}

// leakedLockKeys counts the keys of lock name still in Redis, fence counter
// aside (it outlives grants on purpose), with SCAN.
func leakedLockKeys(ctx context.Context, rdb *redis.Client, name string) (int, error) {
	n := 0
	iter := rdb.Scan(ctx, 0, dlock.DefaultPrefix+"{"+name+"}*", 100).Iterator()
	for iter.Next(ctx) {
		if !strings.HasSuffix(iter.Val(), ":fence") {
			n++
		}
	}
	return n, iter.Err()
}

// Print writes the table.
func (r *SeckillResult) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tbuyers\tstock\tsold\toversold\tfinal stock\tleaked lock keys\torders/s\tp50 ms\tp99 ms\tsold out\tbusy\terrors\tstale writes rejected\treconciled\t")
	for _, x := range r.Rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%d\t%d\t%d\t%d\t%s\t\n",
			x.Strategy, x.Buyers, x.Stock, x.Sold, x.Oversold, x.FinalStock, x.LeakedLockKeys,
			x.OrdersPerSec, x.P50MS, x.P99MS, x.SoldOut, x.Busy, x.Errors, x.StaleWritesRejected, clean(x))
	}
	tw.Flush()
	for _, x := range r.Rows {
		for _, p := range x.Problems {
			fmt.Fprintf(w, "  %s: %s\n", x.Strategy, p)
		}
	}
}

func clean(x SeckillRow) string {
	if x.ReconcileClean {
		return "clean"
	}
	return "PROBLEMS"
}
