package inventory

import (
	"context"
	"fmt"
	"strings"
)

// RemoveSKU deletes what a sale of sku left in the database, in one
// transaction: its orders, its stock row, and the idempotency rows of the
// request ids that start with requestPrefix (pass the prefix every request
// of the sale used; "" removes none). It returns the orders removed. For
// demos and drills that put a throwaway sku on sale in someone's database;
// Redis keys are the caller's (Prededuct.RemoveKeys, the lock's keys).
func RemoveSKU(ctx context.Context, st Store, sku, requestPrefix string) (orders int64, err error) {
	if err := validSKU(sku); err != nil {
		return 0, err
	}
	err = st.db().inTx(ctx, func(q querier) error {
		if orders, err = q.exec(ctx, `DELETE FROM orders WHERE sku = $1`, sku); err != nil {
			return err
		}
		if requestPrefix != "" {
			if _, err := q.exec(ctx, `DELETE FROM idem WHERE biz_key LIKE $1 ESCAPE '\'`, likePrefix(bizKey(requestPrefix))); err != nil {
				return err
			}
		}
		_, err := q.exec(ctx, `DELETE FROM stock WHERE sku = $1`, sku)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("inventory: remove %q: %w", sku, err)
	}
	return orders, nil
}

// likePrefix returns a LIKE pattern (escape character \) matching strings
// that start with p.
func likePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p) + "%"
}

// RemoveKeys deletes a sku's Redis keys (stock, request ids, order stream,
// dead letters). Call it once the stream is drained.
func (p *Prededuct) RemoveKeys(ctx context.Context, sku string) error {
	k := p.keys(sku)
	for _, key := range []string{k.stock, k.req, k.stream, k.dead} { // one by one: a cluster may not take them in one DEL
		if err := p.rdb.Del(ctx, key).Err(); err != nil {
			return fmt.Errorf("inventory: remove keys of %q: %w", sku, err)
		}
	}
	return nil
}
