package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockgo/dlock"
)

// LockName returns the name of a sku's lock: "stock:" + sku (the Client
// adds its prefix and makes the name the hash tag).
func LockName(sku string) string { return "stock:" + sku }

// lockOpts returns the Acquire options of Options.
func lockOpts(o Options) []dlock.Option {
	opts := []dlock.Option{dlock.Wait(o.Wait)}
	if o.Lease > 0 {
		opts = append(opts, dlock.LeaseTime(o.Lease))
	}
	return opts
}

// Locked is 000 §3.3 A: take the sku's lock (Options.Wait; Busy when it
// runs out: the degraded path of 000 §2.12), then in one transaction read,
// check, write the computed stock and insert the order, verify the lock is
// still ours (check before commit, 000 §2.5), commit, and only then release
// (002 §4.3). The transaction runs under the lease's context, so a lock lost
// before commit rolls it back. A release that finds the lock lost after the
// commit returns ErrLockLost, never success: the sale ran without
// exclusivity and must be reconciled. A stock read before the lock that is
// already too low answers sold out without locking.
type Locked struct {
	f     sqlFrame
	locks Lockers

	section func(sku string) (exit func()) // tests: marks the critical section
}

// NewLocked returns the lock strategy on st with locks from c.
func NewLocked(st Store, c *dlock.Client, o Options) (*Locked, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: lock strategy needs a dlock Client", ErrInvalidInput)
	}
	return newLocked(st, redisLockers{c}, o)
}

// newLocked returns the lock strategy on st with locks from ls.
func newLocked(st Store, ls Lockers, o Options) (*Locked, error) {
	if ls == nil {
		return nil, fmt.Errorf("%w: lock strategy needs a lock client", ErrInvalidInput)
	}
	f, err := newFrame(st, o)
	if err != nil {
		return nil, err
	}
	return &Locked{f: f, locks: ls}, nil
}

// Name returns "lock".
func (l *Locked) Name() string { return "lock" }

// Buy: see Strategy.
func (l *Locked) Buy(ctx context.Context, sku string, qty int64, buyer, requestID string) (Result, error) {
	return l.f.buy(ctx, sku, qty, buyer, requestID, func(ctx context.Context, st Stock) (Result, error) {
		if st.Qty < qty {
			return l.f.soldOut(ctx, requestID)
		}
		lease, err := l.locks.Lock(LockName(sku)).Acquire(ctx, lockOpts(l.f.opt)...)
		if errors.Is(err, dlock.ErrNotAcquired) {
			return busy("lock not acquired in time")
		}
		if err != nil {
			return failed(fmt.Errorf("inventory: lock: %w", err))
		}
		res, err := l.locked(lease.Context(), lease, sku, qty, buyer, requestID)
		uerr := lease.Unlock(context.WithoutCancel(ctx))
		if err != nil {
			return failed(err)
		}
		if errors.Is(uerr, dlock.ErrLockLost) {
			return failed(fmt.Errorf("%w: %s committed (%s): %w", ErrLockLost, requestID, res.Outcome, uerr))
		}
		return res, nil
	})
}

// locked is the critical section.
func (l *Locked) locked(ctx context.Context, lease *dlock.Lease, sku string, qty int64, buyer, requestID string) (Result, error) {
	if l.section != nil {
		defer l.section(sku)()
	}
	if err := think(ctx, l.f.opt.ThinkTime); err != nil {
		return Result{}, fmt.Errorf("inventory: lock: %w", context.Cause(ctx))
	}
	var res Result
	err := l.f.db.inTx(ctx, func(q querier) error {
		st, err := stock(ctx, q, sku)
		if err != nil {
			return err
		}
		if st.Qty < qty {
			res = Result{Outcome: SoldOut, Left: 0}
			return finish(ctx, q, requestID)
		}
		if _, err := q.exec(ctx, `UPDATE stock SET qty = $1, version = version + 1 WHERE sku = $2`, st.Qty-qty, sku); err != nil {
			return fmt.Errorf("inventory: lock: update stock: %w", err)
		}
		res = Result{Outcome: Sold, Left: st.Qty - qty}
		if res.OrderID, err = sell(ctx, q, sku, qty, buyer, requestID); err != nil {
			return err
		}
		return lease.Verify(ctx) // check before commit
	})
	if err != nil && ctx.Err() != nil {
		err = fmt.Errorf("inventory: lock: rolled back: %w (%w)", context.Cause(ctx), err)
	}
	return res, err
}

// Reconcile: see Strategy.
func (l *Locked) Reconcile(ctx context.Context, sku string) (Report, error) {
	return Reconcile(ctx, l.f.store, sku)
}
