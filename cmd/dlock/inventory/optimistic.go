package inventory

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// errConflict: the version changed between read and write.
var errConflict = errors.New("inventory: version conflict")

// Optimistic is the version-column optimistic lock of 002 §3.3: read qty
// and version, check, write qty = read - n only WHERE version = the version
// read; zero rows means someone wrote in between, so read again, up to
// Options.Retries attempts with a short random backoff, then Busy.
type Optimistic struct{ f sqlFrame }

// NewOptimistic returns the optimistic strategy on st.
func NewOptimistic(st Store, o Options) (*Optimistic, error) {
	f, err := newFrame(st, o)
	if err != nil {
		return nil, err
	}
	return &Optimistic{f: f}, nil
}

// Name returns "optimistic".
func (o *Optimistic) Name() string { return "optimistic" }

// Buy: see Strategy.
func (o *Optimistic) Buy(ctx context.Context, sku string, qty int64, buyer, requestID string) (Result, error) {
	return o.f.buy(ctx, sku, qty, buyer, requestID, func(ctx context.Context, _ Stock) (Result, error) {
		for attempt := 1; attempt <= o.f.opt.Retries; attempt++ {
			res, err := o.try(ctx, sku, qty, buyer, requestID)
			if !errors.Is(err, errConflict) {
				if err != nil {
					return failed(err)
				}
				return res, nil
			}
			backoff := time.Duration(rand.Int64N(int64(attempt) * int64(time.Millisecond)))
			if err := think(ctx, backoff); err != nil {
				return failed(fmt.Errorf("inventory: optimistic: %w", err))
			}
		}
		return busy(fmt.Sprintf("version conflicts on %d attempts", o.f.opt.Retries))
	})
}

func (o *Optimistic) try(ctx context.Context, sku string, qty int64, buyer, requestID string) (Result, error) {
	var res Result
	err := o.f.db.inTx(ctx, func(q querier) error {
		st, err := stock(ctx, q, sku)
		if err != nil {
			return err
		}
		if st.Qty < qty {
			res = Result{Outcome: SoldOut, Left: 0}
			return finish(ctx, q, requestID)
		}
		n, err := q.exec(ctx, `UPDATE stock SET qty = $1, version = version + 1 WHERE sku = $2 AND version = $3`, st.Qty-qty, sku, st.Version)
		if err != nil {
			return fmt.Errorf("inventory: optimistic: update stock: %w", err)
		}
		if n == 0 {
			return errConflict
		}
		res = Result{Outcome: Sold, Left: st.Qty - qty}
		res.OrderID, err = sell(ctx, q, sku, qty, buyer, requestID)
		return err
	})
	return res, err
}

// Reconcile: see Strategy.
func (o *Optimistic) Reconcile(ctx context.Context, sku string) (Report, error) {
	return Reconcile(ctx, o.f.store, sku)
}
