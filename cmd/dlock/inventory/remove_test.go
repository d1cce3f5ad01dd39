package inventory_test

import (
	"context"
	"errors"
	"testing"

	"github.com/dlockgo/dlock/cmd/dlock/inventory"
)

// TestRemoveSKU: RemoveSKU deletes a sku's stock row, its orders and the
// idempotency rows of its request prefix, taken literally (an underscore
// is not a wildcard), and nothing of another sku.
func TestRemoveSKU(t *testing.T) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			w := newWorld(t, kind)
			w.addSKU(t, "a_b", 5)
			w.addSKU(t, "aXb", 5)
			s := w.strategy(t, "conditional", inventory.Options{})
			for _, b := range []struct{ sku, rid string }{{"a_b", "a_b-req-1"}, {"a_b", "a_b-req-2"}, {"aXb", "aXb-req-1"}} {
				if res, err := s.Buy(ctx, b.sku, 1, "alice", b.rid); res.Outcome != inventory.Sold {
					t.Fatalf("%+v %v", res, err)
				}
			}
			n, err := inventory.RemoveSKU(ctx, w.store, "a_b", "a_b-req-")
			if err != nil || n != 2 {
				t.Fatalf("RemoveSKU: %d orders, %v; want 2", n, err)
			}
			if _, err := w.store.Stock(ctx, "a_b"); !errors.Is(err, inventory.ErrUnknownSKU) {
				t.Fatalf("a_b still on sale: %v", err)
			}
			if got := count(t, w, `SELECT COUNT(*) FROM orders`); got != 1 {
				t.Fatalf("%d orders left, want aXb's one", got)
			}
			if got := count(t, w, `SELECT COUNT(*) FROM idem WHERE biz_key = 'buy:aXb-req-1'`); got != 1 {
				t.Fatal("aXb's idempotency row was removed")
			}
			if got := count(t, w, `SELECT COUNT(*) FROM idem`); got != 1 {
				t.Fatalf("%d idem rows left, want 1", got)
			}
			if _, err := inventory.RemoveSKU(ctx, w.store, "a{b}", ""); !errors.Is(err, inventory.ErrInvalidInput) {
				t.Fatalf("malformed sku: %v", err)
			}
		})
	}
}
