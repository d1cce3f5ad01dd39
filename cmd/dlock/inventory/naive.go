package inventory

import (
	"context"
	"fmt"
)

// Naive is the bug of 002 §1.1, kept to show the oversell: read the stock,
// check it, then write the computed value (qty = read - n) with nothing
// holding the row in between. Concurrent buyers read the same stock and
// each write their own result: more orders than units. ThinkTime (default
// 5 ms) sits between the read and the write so the race shows on two cores.
// Never use it for real sales.
type Naive struct{ f sqlFrame }

// NewNaive returns the naive strategy on st.
func NewNaive(st Store, o Options) (*Naive, error) {
	if o.ThinkTime == 0 {
		o.ThinkTime = DefaultThinkTime
	}
	f, err := newFrame(st, o)
	if err != nil {
		return nil, err
	}
	return &Naive{f: f}, nil
}

// Name returns "naive".
func (n *Naive) Name() string { return "naive" }

// Buy: see Strategy. It oversells under concurrency, by design.
func (n *Naive) Buy(ctx context.Context, sku string, qty int64, buyer, requestID string) (Result, error) {
	return n.f.buy(ctx, sku, qty, buyer, requestID, func(ctx context.Context, _ Stock) (Result, error) {
		st, err := stock(ctx, n.f.db, sku) // read
		if err != nil {
			return failed(err)
		}
		if err := think(ctx, n.f.opt.ThinkTime); err != nil {
			return failed(fmt.Errorf("inventory: naive: %w", err))
		}
		if st.Qty < qty { // check
			return n.f.soldOut(ctx, requestID)
		}
		left := st.Qty - qty
		var id int64
		err = n.f.db.inTx(ctx, func(q querier) error { // write the computed value
			if _, err := q.exec(ctx, `UPDATE stock SET qty = $1, version = version + 1 WHERE sku = $2`, left, sku); err != nil {
				return fmt.Errorf("inventory: naive: update stock: %w", err)
			}
			id, err = sell(ctx, q, sku, qty, buyer, requestID)
			return err
		})
		if err != nil {
			return failed(err)
		}
		return Result{Outcome: Sold, OrderID: id, Left: left}, nil
	})
}

// Reconcile: see Strategy.
func (n *Naive) Reconcile(ctx context.Context, sku string) (Report, error) {
	return Reconcile(ctx, n.f.store, sku)
}
