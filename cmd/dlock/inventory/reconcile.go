package inventory

import (
	"context"
	"fmt"
	"strings"
)

// Report is the reconciliation of one sku (what the articles keep calling
// for after a flash sale or a failover drill).
//
// SQL: Initial units were put on sale; Orders orders took Units of them;
// Qty are left. Oversold = Units - Initial when positive (sold what did not
// exist); Unaccounted = Initial - Qty - Units (non-zero: units vanished or
// appeared in the stock row, e.g. the naive strategy's lost updates).
//
// Redis (prededuct): RedisQty are left to pre-deduct; Pending units are
// queued in the stream and not yet written to SQL. In balance,
// RedisQty + Pending = Qty. Undersold = Qty - Pending - RedisQty when
// positive (taken in Redis, neither queued nor ordered: lost); RedisExcess
// is the opposite (Redis could sell units SQL does not have).
// RedisMissing: Redis has no stock key for the sku (it lost its data, or the
// sku was never warmed up); Undersold and RedisExcess are then not computed,
// and the next Buy warms the sku up from the database.
// DeadLetters counts stream entries the consumer could not apply and
// compensated (their units returned to Redis).
type Report struct {
	SKU          string   `json:"sku"`
	Initial      int64    `json:"initial"`
	Qty          int64    `json:"qty"`
	Orders       int64    `json:"orders"`
	Units        int64    `json:"units"`
	Oversold     int64    `json:"oversold"`
	Unaccounted  int64    `json:"unaccounted"`
	Redis        bool     `json:"redis"`
	RedisQty     int64    `json:"redis_qty"`
	RedisMissing bool     `json:"redis_missing,omitempty"`
	Pending      int64    `json:"pending"`
	Undersold    int64    `json:"undersold"`
	RedisExcess  int64    `json:"redis_excess"`
	DeadLetters  int64    `json:"dead_letters"`
	Problems     []string `json:"problems,omitempty"`
}

// Clean reports whether the books balance and nothing is pending.
func (r Report) Clean() bool { return len(r.Problems) == 0 && r.Pending == 0 }

func (r Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: initial %d, left %d, %d orders for %d units", r.SKU, r.Initial, r.Qty, r.Orders, r.Units)
	if r.Redis {
		fmt.Fprintf(&b, ", redis %d, pending %d", r.RedisQty, r.Pending)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(&b, "; PROBLEMS: %s", strings.Join(r.Problems, "; "))
	}
	return b.String()
}

func (r *Report) problem(format string, a ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, a...))
}

// Reconcile checks a sku's SQL books: qty >= 0, orders <= initial, and
// initial = qty + units ordered.
func Reconcile(ctx context.Context, s Store, sku string) (Report, error) {
	if err := validSKU(sku); err != nil {
		return Report{}, err
	}
	st, err := s.Stock(ctx, sku)
	if err != nil {
		return Report{}, err
	}
	count, units, err := s.Orders(ctx, sku)
	if err != nil {
		return Report{}, err
	}
	r := Report{SKU: sku, Initial: st.Initial, Qty: st.Qty, Orders: count, Units: units}
	r.Oversold = max(0, units-st.Initial)
	r.Unaccounted = st.Initial - st.Qty - units
	if st.Qty < 0 {
		r.problem("negative stock %d", st.Qty)
	}
	if r.Oversold > 0 {
		r.problem("oversold by %d units", r.Oversold)
	}
	if r.Unaccounted != 0 {
		r.problem("initial %d != left %d + ordered %d", st.Initial, st.Qty, units)
	}
	return r, nil
}
