package inventory_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/internal/witness"
)

const (
	buyers = 500
	units  = 10
)

// TestFlashSaleSellsExactlyTheStock is 002 §4.5: 500 concurrent buyers for
// 10 units, for every strategy but naive, on both stores: exactly 10
// orders, stock 0, Reconcile clean, no lock key left in Redis (the fence
// counters stay by design: they keep tokens increasing).
func TestFlashSaleSellsExactlyTheStock(t *testing.T) {
	for _, kind := range kinds {
		for _, name := range []string{"lock", "conditional", "optimistic", "fenced", "prededuct"} {
			t.Run(kind+"/"+name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
				defer cancel()
				w := newWorld(t, kind)
				w.addSKU(t, "1001", units)
				s := w.strategy(t, name, inventory.Options{Wait: 20 * time.Second}, "1001")
				var wit witness.Witness
				inventory.SetSection(s, func(sku string) func() {
					wit.Enter(sku)
					return func() { wit.Exit(sku) }
				})

				var consumerDone chan error
				var consumer *inventory.Consumer
				if p, ok := s.(*inventory.Prededuct); ok { // persist while selling
					consumer = p.NewConsumer(inventory.ConsumerOptions{Block: 50 * time.Millisecond})
					cctx, stop := context.WithCancel(ctx)
					defer stop()
					consumerDone = make(chan error, 1)
					go func() { consumerDone <- consumer.Run(cctx, "1001") }()
					defer func() {
						stop()
						if err := <-consumerDone; err != nil {
							t.Error(err)
						}
					}()
				}

				r := sale(ctx, s, "1001", buyers, name)
				for _, err := range r.errs {
					t.Errorf("buy error: %v", err)
				}
				if r.outcomes[inventory.Sold] != units {
					t.Fatalf("outcomes %v, want exactly %d sold", r.outcomes, units)
				}
				if consumer != nil {
					if err := consumer.Drain(ctx, "1001"); err != nil {
						t.Fatal(err)
					}
				}
				if ids := orderRequestIDs(t, w, "1001"); !slices.Equal(ids, r.sold) {
					t.Fatalf("orders %v, want one per sold request %v", ids, r.sold)
				}
				rep, err := s.Reconcile(ctx, "1001")
				if err != nil {
					t.Fatal(err)
				}
				if !rep.Clean() || rep.Qty != 0 || rep.Orders != units || rep.Units != units {
					t.Fatalf("reconcile: %s (clean %v), want 0 left, %d orders", rep, rep.Clean(), units)
				}
				if n := wit.Overlaps(); n != 0 {
					t.Fatalf("%d overlapping critical sections", n)
				}
				if left := lockKeysLeft(t, w.rdb); len(left) != 0 {
					t.Fatalf("lock keys left in Redis: %v", left)
				}
				t.Logf("%s: %v in %v", rep, r.outcomes, r.elapsed.Round(time.Millisecond))
			})
		}
	}
}

// TestNaiveOversells keeps the demo honest: the bug of 002 §1.1 reproduces.
func TestNaiveOversells(t *testing.T) {
	oversold := 0
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			w := newWorld(t, kind)
			w.addSKU(t, "1001", units)
			s := w.strategy(t, "naive", inventory.Options{})
			r := sale(ctx, s, "1001", buyers, "naive")
			rep, err := s.Reconcile(ctx, "1001")
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %v", rep, r.outcomes)
			if rep.Qty < 0 {
				t.Fatalf("negative stock %d: the CHECK constraint should have refused it", rep.Qty)
			}
			if rep.Orders > units {
				oversold++
				if rep.Clean() || rep.Oversold != rep.Units-units {
					t.Fatalf("reconcile missed the oversell: %s", rep)
				}
			}
		})
	}
	if oversold == 0 {
		t.Fatal("naive did not oversell on any store: the demo no longer shows the bug")
	}
}
