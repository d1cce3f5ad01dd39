package inventory_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/internal/pgtest"
	"github.com/dlockgo/dlock/internal/pgtest/pgproc"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
)

// pg is one PostgreSQL server for the package; each test gets a database.
var pg *pgproc.Server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childConsumer())
	}
	os.Exit(pgtest.Run(m, func(s *pgproc.Server) { pg = s }))
}

var dbSeq atomic.Int64

// kinds are the two stores every behaviour is checked on.
var kinds = []string{"postgres", "sqlite"}

// world is one test's servers and clients.
type world struct {
	kind  string
	dsn   string // how a second process opens the same store
	store inventory.Store
	rdb   *redis.Client
	srv   *redisproc.Server // the redis-server behind rdb
	locks *dlock.Client
}

// newWorld starts a redis-server and opens a fresh store of kind.
func newWorld(t testing.TB, kind string) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{kind: kind}
	switch kind {
	case "postgres":
		name := fmt.Sprintf("inv%d_%d", os.Getpid(), dbSeq.Add(1))
		dsn, err := pg.CreateDatabase(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := pg.DropDatabase(context.Background(), name); err != nil {
				t.Error(err)
			}
		})
		w.dsn = dsn
	case "sqlite":
		w.dsn = "sqlite:" + filepath.Join(t.TempDir(), "shop.db")
	}
	st, err := inventory.Open(ctx, w.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w.store = st
	w.srv = redistest.Start(t)
	w.rdb = redistest.Client(t, w.srv)
	w.locks = newLocks(t, w.rdb)
	return w
}

func newLocks(t testing.TB, rdb redis.UniversalClient) *dlock.Client {
	t.Helper()
	c, err := dlock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func (w *world) deps() inventory.Deps {
	return inventory.Deps{Store: w.store, Locks: w.locks, Redis: w.rdb}
}

// strategy builds a strategy; a prededuct one is warmed up for skus.
func (w *world) strategy(t testing.TB, name string, o inventory.Options, skus ...string) inventory.Strategy {
	t.Helper()
	s, err := inventory.New(name, w.deps(), o)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := s.(*inventory.Prededuct); ok {
		for _, sku := range skus {
			if _, err := p.WarmUp(context.Background(), sku); err != nil {
				t.Fatal(err)
			}
		}
	}
	return s
}

func (w *world) addSKU(t testing.TB, sku string, qty int64) {
	t.Helper()
	if _, err := w.store.AddSKU(context.Background(), sku, qty); err != nil {
		t.Fatal(err)
	}
}

// saleResult counts the outcomes of a sale.
type saleResult struct {
	outcomes map[inventory.Outcome]int
	sold     []string // request ids sold
	errs     []error
	lat      []time.Duration
	elapsed  time.Duration
}

// sale runs buyers concurrent buyers of one unit each, all started at once.
func sale(ctx context.Context, s inventory.Strategy, sku string, buyers int, tag string) saleResult {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
		r     = saleResult{outcomes: map[inventory.Outcome]int{}}
	)
	for i := range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			rid := fmt.Sprintf("%s-r%d", tag, i)
			t0 := time.Now()
			res, err := s.Buy(ctx, sku, 1, fmt.Sprintf("buyer%d", i), rid)
			d := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			r.lat = append(r.lat, d)
			r.outcomes[res.Outcome]++
			if res.Outcome == inventory.Sold {
				r.sold = append(r.sold, rid)
			}
			if err != nil {
				r.errs = append(r.errs, err)
			}
		}()
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	r.elapsed = time.Since(t0)
	sort.Strings(r.sold)
	return r
}

// lockKeysLeft lists the dlock keys left in Redis, fence counters aside.
func lockKeysLeft(t testing.TB, rdb *redis.Client) []string {
	t.Helper()
	keys, err := rdb.Keys(context.Background(), dlock.DefaultPrefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, k := range keys {
		if !strings.HasPrefix(k, dlock.DefaultPrefix+"fence:") && !strings.HasSuffix(k, ":count") {
			left = append(left, k)
		}
	}
	return left
}

// orderRequestIDs lists the request ids of a sku's orders, sorted.
func orderRequestIDs(t testing.TB, w *world, sku string) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	switch st := w.store.(type) {
	case *inventory.PostgresStore:
		rows, err := st.Pool().Query(ctx, `SELECT request_id FROM orders WHERE sku = $1 ORDER BY request_id`, sku)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	case *inventory.SQLiteStore:
		rows, err := st.DB().QueryContext(ctx, `SELECT request_id FROM orders WHERE sku = $1 ORDER BY request_id`, sku)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
	}
	return ids
}

// execSQL runs a statement on the store directly (test setup only).
func execSQL(t testing.TB, w *world, q string, args ...any) {
	t.Helper()
	ctx := context.Background()
	var err error
	switch st := w.store.(type) {
	case *inventory.PostgresStore:
		_, err = st.Pool().Exec(ctx, q, args...)
	case *inventory.SQLiteStore:
		_, err = st.DB().ExecContext(ctx, q, args...)
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// count runs a COUNT(*) query on the store.
func count(t testing.TB, w *world, q string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	var n int64
	var err error
	switch st := w.store.(type) {
	case *inventory.PostgresStore:
		err = st.Pool().QueryRow(ctx, q, args...).Scan(&n)
	case *inventory.SQLiteStore:
		err = st.DB().QueryRowContext(ctx, q, args...).Scan(&n)
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}
