package inventory

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/fence"
)

// stockDeduct is the fenced write of the fenced strategy.
var stockDeduct = fence.Update{Table: "stock", Key: "sku", Set: "qty = qty - $1, version = version + 1", Where: "qty >= $1"}

// Fenced is the lock plus the fence column (000 §2.8): take the sku's lock,
// then write with the lease's token
//
//	UPDATE stock SET qty = qty - n, version = version + 1, fence = token
//	 WHERE sku = ? AND fence <= token AND qty >= n
//
// so the database, not the lock, has the last word: a holder whose lock
// expired (a pause, a failover) and whose successor already wrote is
// rejected (fence.ErrStale, counted by Rejected), and the stock never goes
// below zero. The write does not consult the lease's local state: a stale
// holder the client does not know about is exactly the case the fence is
// for. A lease lost without a newer writer is still a valid sale
// (Result.LeaseLost).
type Fenced struct {
	f        sqlFrame
	locks    Lockers
	rejected atomic.Int64

	section func(sku string) (exit func()) // tests: marks the critical section
}

// NewFenced returns the fenced strategy on st with locks from c.
func NewFenced(st Store, c *dlock.Client, o Options) (*Fenced, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: fenced strategy needs a dlock Client", ErrInvalidInput)
	}
	return newFenced(st, redisLockers{c}, o)
}

// newFenced returns the fenced strategy on st with locks from ls.
func newFenced(st Store, ls Lockers, o Options) (*Fenced, error) {
	if ls == nil {
		return nil, fmt.Errorf("%w: fenced strategy needs a lock client", ErrInvalidInput)
	}
	f, err := newFrame(st, o)
	if err != nil {
		return nil, err
	}
	return &Fenced{f: f, locks: ls}, nil
}

// Name returns "fenced".
func (fs *Fenced) Name() string { return "fenced" }

// Rejected returns how many writes the fence rejected as stale.
func (fs *Fenced) Rejected() int64 { return fs.rejected.Load() }

// Buy: see Strategy. A stale write returns Failed with an error wrapping
// fence.ErrStale; the request may be retried.
func (fs *Fenced) Buy(ctx context.Context, sku string, qty int64, buyer, requestID string) (Result, error) {
	return fs.f.buy(ctx, sku, qty, buyer, requestID, func(ctx context.Context, st Stock) (Result, error) {
		if st.Qty < qty {
			return fs.f.soldOut(ctx, requestID)
		}
		lease, err := fs.locks.Lock(LockName(sku)).Acquire(ctx, lockOpts(fs.f.opt)...)
		if errors.Is(err, dlock.ErrNotAcquired) {
			return busy("lock not acquired in time")
		}
		if err != nil {
			return failed(fmt.Errorf("inventory: fenced: %w", err))
		}
		res, err := fs.write(ctx, lease.Token(), sku, qty, buyer, requestID)
		uerr := lease.Unlock(context.WithoutCancel(ctx))
		if err != nil {
			if errors.Is(err, fence.ErrStale) {
				fs.rejected.Add(1)
			}
			return failed(err)
		}
		res.LeaseLost = errors.Is(uerr, dlock.ErrLockLost)
		return res, nil
	})
}

func (fs *Fenced) write(ctx context.Context, token int64, sku string, qty int64, buyer, requestID string) (Result, error) {
	if fs.section != nil {
		defer fs.section(sku)()
	}
	if err := think(ctx, fs.f.opt.ThinkTime); err != nil {
		return Result{}, fmt.Errorf("inventory: fenced: %w", err)
	}
	var res Result
	err := fs.f.db.inTx(ctx, func(q querier) error {
		err := q.fenced(ctx, stockDeduct, token, sku, qty)
		switch {
		case errors.Is(err, fence.ErrCondition):
			res = Result{Outcome: SoldOut, Left: 0}
			return finish(ctx, q, requestID)
		case err != nil:
			return fmt.Errorf("inventory: fenced: %w", err)
		}
		res = Result{Outcome: Sold, Left: -1}
		res.OrderID, err = sell(ctx, q, sku, qty, buyer, requestID)
		return err
	})
	return res, err
}

// Reconcile: see Strategy.
func (fs *Fenced) Reconcile(ctx context.Context, sku string) (Report, error) {
	return Reconcile(ctx, fs.f.store, sku)
}
