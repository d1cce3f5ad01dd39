package inventory

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The idempotency protocol of 000 §3.4 on the idem table, keyed by
// "buy:" + request id: claim the key (status 0) before working; the
// transaction that sells (or finds the stock sold out) sets it to 1; a busy
// or failed attempt sets it to 2, which lets a retry claim it again. A key
// left at 0 longer than Options.StaleAfter (its process died) may be taken
// over; the UNIQUE request_id of orders keeps a late original from selling
// twice.

type claimState int

const (
	claimed    claimState = iota // ours to process
	done                         // processed before: replay its result
	inProgress                   // someone else is processing it
)

func bizKey(requestID string) string { return "buy:" + requestID }

// claim claims a request id.
func claim(ctx context.Context, db sqlDB, requestID string, staleAfter time.Duration) (claimState, error) {
	key := bizKey(requestID)
	n, err := db.exec(ctx, `INSERT INTO idem (biz_key, status) VALUES ($1, 0) ON CONFLICT (biz_key) DO NOTHING`, key)
	if err != nil {
		return 0, fmt.Errorf("inventory: claim request %q: %w", requestID, err)
	}
	if n == 1 {
		return claimed, nil
	}
	d := db.dialect()
	n, err = db.exec(ctx, `UPDATE idem SET status = 0, created_at = `+d.now+
		` WHERE biz_key = $1 AND (status = 2 OR (status = 0 AND `+d.age+` > $2))`, key, staleAfter.Seconds())
	if err != nil {
		return 0, fmt.Errorf("inventory: claim request %q: %w", requestID, err)
	}
	if n == 1 {
		return claimed, nil
	}
	var status int
	err = db.queryRow(ctx, `SELECT status FROM idem WHERE biz_key = $1`, key).Scan(&status)
	switch {
	case errors.Is(err, errNoRows): // deleted meanwhile: a retry will claim it
		return inProgress, nil
	case err != nil:
		return 0, fmt.Errorf("inventory: claim request %q: %w", requestID, err)
	case status == 1:
		return done, nil
	}
	return inProgress, nil
}

// finish marks the request done inside the transaction that decided it.
func finish(ctx context.Context, q querier, requestID string) error {
	if _, err := q.exec(ctx, `UPDATE idem SET status = 1 WHERE biz_key = $1`, bizKey(requestID)); err != nil {
		return fmt.Errorf("inventory: finish request %q: %w", requestID, err)
	}
	return nil
}

// release marks a claimed request failed (2) so that a retry may claim it;
// a request already done stays done. It runs even if ctx was cancelled.
func release(ctx context.Context, db sqlDB, requestID string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = db.exec(ctx, `UPDATE idem SET status = 2 WHERE biz_key = $1 AND status = 0`, bizKey(requestID))
}

// replay returns the first result of a done request: its order, or sold
// out when it has none. A request id reused for another purchase is
// ErrInvalidInput.
func replay(ctx context.Context, q querier, sku string, qty int64, buyer, requestID string) (Result, error) {
	o, ok, err := orderByRequest(ctx, q, requestID)
	if err != nil {
		return failed(err)
	}
	if !ok {
		return Result{Outcome: SoldOut, Left: -1, Replayed: true}, nil
	}
	if o.sku != sku || o.qty != qty || o.buyer != buyer {
		return failed(fmt.Errorf("%w: request id %q was used for another purchase (%s × %d for %s)", ErrInvalidInput, requestID, o.sku, o.qty, o.buyer))
	}
	return Result{Outcome: Sold, OrderID: o.id, Left: -1, Replayed: true}, nil
}
