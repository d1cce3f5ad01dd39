package inventory

import (
	"context"
	"errors"
	"time"
)

// errDuplicate: the order insert found the request id taken (a retry took
// over a request whose original then finished): roll back and replay.
var errDuplicate = errors.New("inventory: duplicate request id")

// sqlFrame is what the SQL strategies share: input checks, the
// idempotency claim around the strategy's attempt, and the sale's writes.
type sqlFrame struct {
	store Store
	db    sqlDB
	opt   Options
}

func newFrame(st Store, o Options) (sqlFrame, error) {
	if st == nil {
		return sqlFrame{}, errors.Join(ErrInvalidInput, errors.New("inventory: nil store"))
	}
	return sqlFrame{store: st, db: st.db(), opt: o.withDefaults()}, nil
}

// buy validates, claims the request id, runs attempt and releases the claim
// unless the attempt decided the request. An error that says Redis or the
// database could not be reached wraps ErrUnavailable.
func (f sqlFrame) buy(ctx context.Context, sku string, qty int64, buyer, requestID string, attempt func(ctx context.Context, st Stock) (Result, error)) (_ Result, err error) {
	defer func() { err = unavailable(err) }()
	if err := f.opt.validate(sku, qty, buyer, requestID); err != nil {
		return failed(err)
	}
	st, err := stock(ctx, f.db, sku) // unknown sku: nothing written
	if err != nil {
		return failed(err)
	}
	cl, err := claim(ctx, f.db, requestID, f.opt.StaleAfter)
	if err != nil {
		return failed(err)
	}
	switch cl {
	case done:
		return replay(ctx, f.db, sku, qty, buyer, requestID)
	case inProgress:
		return busy("a request with this id is being processed")
	}
	res, err := attempt(ctx, st)
	if errors.Is(err, errDuplicate) {
		return replay(ctx, f.db, sku, qty, buyer, requestID)
	}
	if res.Outcome == Busy || res.Outcome == Failed {
		release(ctx, f.db, requestID)
	}
	return res, err
}

// sell writes the order and marks the request done, inside the sale's
// transaction.
func sell(ctx context.Context, q querier, sku string, qty int64, buyer, requestID string) (int64, error) {
	id, ok, err := insertOrder(ctx, q, sku, qty, buyer, requestID)
	if err != nil {
		return 0, err
	}
	if !ok {
		return 0, errDuplicate
	}
	return id, finish(ctx, q, requestID)
}

// soldOut records a sold-out decision for the request.
func (f sqlFrame) soldOut(ctx context.Context, requestID string) (Result, error) {
	if err := finish(ctx, f.db, requestID); err != nil {
		return failed(err)
	}
	return Result{Outcome: SoldOut, Left: 0}, nil
}

// think sleeps d (if positive) or until ctx is done.
func think(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
