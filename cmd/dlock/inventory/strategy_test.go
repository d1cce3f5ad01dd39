package inventory_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/fence"
)

// TestFencedRejectsStaleHolder: holder A's lease (150 ms) runs out while it
// is paused inside its critical section; B takes the lock with a higher
// token and sells the last unit; when A resumes, the database rejects its
// write as stale, counts it, and the stock never goes below 0.
func TestFencedRejectsStaleHolder(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			w := newWorld(t, kind)
			w.addSKU(t, "1001", 1)
			// Two processes: their own dlock Clients on the same Redis.
			a, err := inventory.NewFenced(w.store, newLocks(t, w.rdb), inventory.Options{Lease: 150 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			b, err := inventory.NewFenced(w.store, newLocks(t, w.rdb), inventory.Options{Wait: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			aInside, bSold := make(chan struct{}), make(chan struct{})
			inventory.SetSection(a, func(string) func() {
				close(aInside)
				select { // the pause: until B has sold (A's lease long gone)
				case <-bSold:
				case <-ctx.Done():
				}
				return func() {}
			})

			type outcome struct {
				res inventory.Result
				err error
			}
			aDone := make(chan outcome, 1)
			go func() {
				res, err := a.Buy(ctx, "1001", 1, "alice", "a1")
				aDone <- outcome{res, err}
			}()
			<-aInside
			res, err := b.Buy(ctx, "1001", 1, "bob", "b1")
			close(bSold)
			if err != nil || res.Outcome != inventory.Sold {
				t.Fatalf("B: %+v %v, want sold", res, err)
			}
			ao := <-aDone
			if ao.res.Outcome != inventory.Failed || !errors.Is(ao.err, fence.ErrStale) {
				t.Fatalf("A (stale): %+v %v, want Failed with fence.ErrStale", ao.res, ao.err)
			}
			if a.Rejected() != 1 || b.Rejected() != 0 {
				t.Fatalf("rejections counted: A %d, B %d; want 1 and 0", a.Rejected(), b.Rejected())
			}
			rep, err := a.Reconcile(ctx, "1001")
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Clean() || rep.Qty != 0 || rep.Orders != 1 {
				t.Fatalf("reconcile: %s", rep)
			}
			// A's request was released (failed): a retry may run, and finds it sold out.
			if res, err := a.Buy(ctx, "1001", 1, "alice", "a1"); err != nil || res.Outcome != inventory.SoldOut {
				t.Fatalf("A's retry: %+v %v, want sold out", res, err)
			}
		})
	}
}

// TestLockLostRollsBack: the lock strategy's lease runs out inside the
// critical section; the transaction is never committed and the result is
// an error wrapping dlock.ErrLockLost, never success.
func TestLockLostRollsBack(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, kind)
			w.addSKU(t, "1001", 5)
			s, err := inventory.NewLocked(w.store, w.locks, inventory.Options{Lease: 100 * time.Millisecond, ThinkTime: 400 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Buy(ctx, "1001", 1, "alice", "r1")
			if res.Outcome != inventory.Failed || !errors.Is(err, dlock.ErrLockLost) {
				t.Fatalf("got %+v %v, want Failed with dlock.ErrLockLost", res, err)
			}
			st, _ := w.store.Stock(ctx, "1001")
			if n, _, _ := w.store.Orders(ctx, "1001"); st.Qty != 5 || n != 0 {
				t.Fatalf("a lost lock committed: qty %d, %d orders", st.Qty, n)
			}
			if left := lockKeysLeft(t, w.rdb); len(left) != 0 {
				t.Fatalf("lock keys left: %v", left)
			}
		})
	}
}

// TestIdempotentPerRequestID: a retried request never buys twice and gets
// the first result, for every strategy on both stores.
func TestIdempotentPerRequestID(t *testing.T) {
	for _, kind := range kinds {
		for _, name := range inventory.Names {
			t.Run(kind+"/"+name, func(t *testing.T) {
				ctx := context.Background()
				w := newWorld(t, kind)
				w.addSKU(t, "1001", 3)
				s := w.strategy(t, name, inventory.Options{ThinkTime: -1}, "1001")
				first, err := s.Buy(ctx, "1001", 2, "alice", "r1")
				if err != nil || first.Outcome != inventory.Sold {
					t.Fatalf("first: %+v %v", first, err)
				}
				again, err := s.Buy(ctx, "1001", 2, "alice", "r1")
				if err != nil || again.Outcome != inventory.Sold || !again.Replayed || again.OrderID != first.OrderID {
					t.Fatalf("retry: %+v %v, want the first result %+v replayed", again, err, first)
				}
				if _, err := s.Buy(ctx, "1001", 1, "alice", "r1"); !errors.Is(err, inventory.ErrInvalidInput) {
					t.Fatalf("request id reused for another qty: %v, want ErrInvalidInput", err)
				}
				out, err := s.Buy(ctx, "1001", 2, "bob", "r2")
				if err != nil || out.Outcome != inventory.SoldOut {
					t.Fatalf("2 of 1 left: %+v %v, want sold out", out, err)
				}
				out, err = s.Buy(ctx, "1001", 2, "bob", "r2")
				if err != nil || out.Outcome != inventory.SoldOut || !out.Replayed {
					t.Fatalf("sold-out retry: %+v %v, want sold out replayed", out, err)
				}
				if p, ok := s.(*inventory.Prededuct); ok {
					if err := p.NewConsumer(inventory.ConsumerOptions{}).Drain(ctx, "1001"); err != nil {
						t.Fatal(err)
					}
				}
				rep, err := s.Reconcile(ctx, "1001")
				if err != nil {
					t.Fatal(err)
				}
				if !rep.Clean() || rep.Orders != 1 || rep.Qty != 1 {
					t.Fatalf("reconcile: %s, want one order and 1 left", rep)
				}
			})
		}
	}
}

// TestBadInputChangesNothing: every strategy rejects bad input with a clear
// error and writes nothing, in SQL or in Redis.
func TestBadInputChangesNothing(t *testing.T) {
	type buy struct {
		sku        string
		qty        int64
		buyer, rid string
		want       error
	}
	cases := []buy{
		{"1001", 0, "alice", "r", inventory.ErrInvalidInput},
		{"1001", -1, "alice", "r", inventory.ErrInvalidInput},
		{"1001", inventory.DefaultMaxQty + 1, "alice", "r", inventory.ErrInvalidInput},
		{"1001", 1, "", "r", inventory.ErrInvalidInput},
		{"1001", 1, "alice", "", inventory.ErrInvalidInput},
		{"1001", 1, strings.Repeat("b", inventory.MaxIDLen+1), "r", inventory.ErrInvalidInput},
		{"", 1, "alice", "r", inventory.ErrInvalidInput},
		{"a{b}", 1, "alice", "r", inventory.ErrInvalidInput},
		{strings.Repeat("s", inventory.MaxSKULen+1), 1, "alice", "r", inventory.ErrInvalidInput},
		{"nope", 1, "alice", "r", inventory.ErrUnknownSKU},
		// Text PostgreSQL cannot store (NUL: SQLSTATE 22021) or that is not
		// text at all is bad input on every store, not a database error.
		{"1001", 1, "\x00bob", "r", inventory.ErrInvalidInput},
		{"1001", 1, "alice", "r\x00", inventory.ErrInvalidInput},
		{"1001", 1, "bo\xffb", "r", inventory.ErrInvalidInput},
		{"1001", 1, "alice", "\xc3\x28", inventory.ErrInvalidInput},
		{"1001", 1, "ali\x1bce", "r", inventory.ErrInvalidInput},
		{"1001", 1, "alice", "r\u0085", inventory.ErrInvalidInput},
	}
	for _, kind := range kinds {
		for _, name := range inventory.Names {
			t.Run(kind+"/"+name, func(t *testing.T) {
				ctx := context.Background()
				w := newWorld(t, kind)
				w.addSKU(t, "1001", 5)
				s := w.strategy(t, name, inventory.Options{}, "1001")
				keysBefore := w.rdb.DBSize(ctx).Val()
				for _, c := range cases {
					res, err := s.Buy(ctx, c.sku, c.qty, c.buyer, c.rid)
					if !errors.Is(err, c.want) || res.Outcome != inventory.Failed {
						t.Errorf("Buy(%q, %d, %q, %q): %+v %v, want Failed with %v", c.sku, c.qty, c.buyer, c.rid, res, err, c.want)
					}
				}
				st, _ := w.store.Stock(ctx, "1001")
				if st.Qty != 5 || st.Version != 0 {
					t.Fatalf("stock changed: %+v", st)
				}
				if n := count(t, w, `SELECT COUNT(*) FROM orders`) + count(t, w, `SELECT COUNT(*) FROM idem`); n != 0 {
					t.Fatalf("%d order or idem rows written", n)
				}
				if n := w.rdb.DBSize(ctx).Val(); n != keysBefore {
					t.Fatalf("redis keys %d -> %d", keysBefore, n)
				}
			})
		}
	}
}

// TestBusyThenRetry: lock not acquired in time is Busy (the degraded path),
// nothing is sold, and the same request id may be retried.
func TestBusyThenRetry(t *testing.T) {
	for _, name := range []string{"lock", "fenced"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, "postgres")
			w.addSKU(t, "1001", 5)
			s := w.strategy(t, name, inventory.Options{Wait: 50 * time.Millisecond})
			other := newLocks(t, w.rdb)
			held, err := other.Lock(inventory.LockName("1001")).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			res, err := s.Buy(ctx, "1001", 1, "alice", "r1")
			if err != nil || res.Outcome != inventory.Busy || res.Reason == "" {
				t.Fatalf("while held elsewhere: %+v %v, want Busy", res, err)
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			res, err = s.Buy(ctx, "1001", 1, "alice", "r1")
			if err != nil || res.Outcome != inventory.Sold || res.Replayed {
				t.Fatalf("retry: %+v %v, want a fresh sale", res, err)
			}
		})
	}
}

// TestProcessingRequestTakenOverWhenStale: a request id left "processing"
// (status 0) by a dead process answers Busy until StaleAfter, then a retry
// takes it over.
func TestProcessingRequestTakenOverWhenStale(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, kind)
			w.addSKU(t, "1001", 5)
			s := w.strategy(t, "conditional", inventory.Options{StaleAfter: time.Minute})
			execSQL(t, w, `INSERT INTO idem (biz_key, status) VALUES ('buy:r1', 0)`)
			res, err := s.Buy(ctx, "1001", 1, "alice", "r1")
			if err != nil || res.Outcome != inventory.Busy {
				t.Fatalf("fresh processing claim: %+v %v, want Busy", res, err)
			}
			old := map[string]string{
				"postgres": `UPDATE idem SET created_at = now() - interval '2 minutes'`,
				"sqlite":   `UPDATE idem SET created_at = datetime('now', '-2 minutes')`,
			}[kind]
			execSQL(t, w, old)
			res, err = s.Buy(ctx, "1001", 1, "alice", "r1")
			if err != nil || res.Outcome != inventory.Sold {
				t.Fatalf("stale claim: %+v %v, want taken over and sold", res, err)
			}
		})
	}
}

// TestStoreSetupAndMigrations: concurrent opens migrate once; AddSKU is
// idempotent and refuses to redefine a sku; bad DSNs are bad input.
func TestStoreSetupAndMigrations(t *testing.T) {
	ctx := context.Background()
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			w := newWorld(t, kind)
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					st, err := inventory.Open(ctx, w.dsn)
					if err == nil {
						err = st.Close()
					}
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("concurrent open: %v", err)
				}
			}
			if n := count(t, w, `SELECT COUNT(*) FROM schema_migrations`); n != 1 {
				t.Fatalf("%d migrations recorded, want 1", n)
			}
			if ok, err := w.store.AddSKU(ctx, "x", 3); !ok || err != nil {
				t.Fatalf("add: %v %v", ok, err)
			}
			if ok, err := w.store.AddSKU(ctx, "x", 3); ok || err != nil {
				t.Fatalf("add again: %v %v, want false nil", ok, err)
			}
			if _, err := w.store.AddSKU(ctx, "x", 4); !errors.Is(err, inventory.ErrExists) {
				t.Fatalf("redefine: %v, want ErrExists", err)
			}
			for _, bad := range []struct {
				sku string
				qty int64
			}{{"", 1}, {"a b", 1}, {"y", -1}} {
				if _, err := w.store.AddSKU(ctx, bad.sku, bad.qty); !errors.Is(err, inventory.ErrInvalidInput) {
					t.Fatalf("AddSKU(%q, %d): %v", bad.sku, bad.qty, err)
				}
			}
			if skus, err := w.store.SKUs(ctx); err != nil || len(skus) != 1 || skus[0] != "x" {
				t.Fatalf("skus %v %v", skus, err)
			}
			if _, err := w.store.Stock(ctx, "nope"); !errors.Is(err, inventory.ErrUnknownSKU) {
				t.Fatalf("unknown sku: %v", err)
			}
		})
	}
	for _, dsn := range []string{"", "mysql://x", "sqlite:", "sqlite:/tmp/x.db?mode=ro"} {
		if _, err := inventory.Open(ctx, dsn); !errors.Is(err, inventory.ErrInvalidInput) {
			t.Errorf("Open(%q): %v, want ErrInvalidInput", dsn, err)
		}
	}
	if _, err := inventory.New("nosuch", inventory.Deps{}, inventory.Options{}); !errors.Is(err, inventory.ErrInvalidInput) {
		t.Errorf("unknown strategy: %v", err)
	}
	if _, err := inventory.New("lock", inventory.Deps{Store: nil}, inventory.Options{}); !errors.Is(err, inventory.ErrInvalidInput) {
		t.Errorf("lock without a store or locks: %v", err)
	}
}
