package inventory

import (
	"context"
	"errors"
	"fmt"
)

// Conditional is 000 §3.3 B, the default: one conditional UPDATE
//
//	UPDATE stock SET qty = qty - n WHERE sku = ? AND qty >= n
//
// in the transaction that inserts the order. The database's row lock makes
// the check and the decrement one step; zero rows means sold out. No lock,
// never busy.
type Conditional struct{ f sqlFrame }

// NewConditional returns the conditional strategy on st.
func NewConditional(st Store, o Options) (*Conditional, error) {
	f, err := newFrame(st, o)
	if err != nil {
		return nil, err
	}
	return &Conditional{f: f}, nil
}

// Name returns "conditional".
func (c *Conditional) Name() string { return "conditional" }

// Buy: see Strategy.
func (c *Conditional) Buy(ctx context.Context, sku string, qty int64, buyer, requestID string) (Result, error) {
	return c.f.buy(ctx, sku, qty, buyer, requestID, func(ctx context.Context, _ Stock) (Result, error) {
		res := Result{Outcome: Sold}
		err := c.f.db.inTx(ctx, func(q querier) error {
			err := q.queryRow(ctx, `UPDATE stock SET qty = qty - $1, version = version + 1 WHERE sku = $2 AND qty >= $1 RETURNING qty`, qty, sku).Scan(&res.Left)
			if errors.Is(err, errNoRows) {
				res = Result{Outcome: SoldOut, Left: 0}
				return finish(ctx, q, requestID)
			}
			if err != nil {
				return fmt.Errorf("inventory: conditional: update stock: %w", err)
			}
			res.OrderID, err = sell(ctx, q, sku, qty, buyer, requestID)
			return err
		})
		if err != nil {
			return failed(err)
		}
		return res, nil
	})
}

// Reconcile: see Strategy.
func (c *Conditional) Reconcile(ctx context.Context, sku string) (Report, error) {
	return Reconcile(ctx, c.f.store, sku)
}
