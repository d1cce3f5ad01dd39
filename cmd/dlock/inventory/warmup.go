package inventory

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/warmup.lua
	warmupLua    string
	warmupScript = redis.NewScript(warmupLua)
)

// warmUpTries bounds how often WarmUp reads again when orders were queued
// while it read (someone else warmed the sku up meanwhile: it then stops).
const warmUpTries = 5

// WarmUp loads a sku's stock from the database (the source of truth) into
// Redis unless Redis has it already: the stock key is never overwritten,
// which would resell units already sold in Redis. It also creates the
// stream's consumer group. The loaded value is the database's stock minus
// the units of the orders still queued in the stream and not yet in the
// database, computed from one read of the stream followed by one of the
// database and set in one script that refuses if an order was queued after
// that read; so several replicas may warm up at once (one wins, the others
// find the key) while consumers persist entries. It reports whether it set
// the key.
//
// Before it sets the key it records the request ids of the sku's orders in
// the database, so that a request retried after Redis lost its data
// replays its order rather than buying again. After such a loss (a restart
// without persistence) the orders Redis had queued and not yet persisted
// are gone with it: WarmUp loads what the database has.
func (p *Prededuct) WarmUp(ctx context.Context, sku string) (bool, error) {
	if err := validSKU(sku); err != nil {
		return false, err
	}
	if _, err := p.f.store.Stock(ctx, sku); err != nil {
		return false, err
	}
	k := p.keys(sku)
	if err := ensureGroup(ctx, p.rdb, k.stream); err != nil {
		return false, unavailable(err)
	}
	for range warmUpTries {
		n, err := p.rdb.Exists(ctx, k.stock).Result()
		if err != nil {
			return false, unavailable(fmt.Errorf("inventory: warm up %q: %w", sku, err))
		}
		if n == 1 {
			return false, nil
		}
		msgs, err := p.rdb.XRange(ctx, k.stream, "-", "+").Result()
		if err != nil {
			return false, unavailable(fmt.Errorf("inventory: warm up %q: read stream: %w", sku, err))
		}
		qty, err := p.unpersistedStock(ctx, sku, msgs)
		if err != nil {
			return false, unavailable(err)
		}
		if err := p.restoreRequests(ctx, sku); err != nil {
			return false, unavailable(err)
		}
		last := "0-0"
		if len(msgs) > 0 {
			last = msgs[len(msgs)-1].ID
		}
		set, err := warmupScript.Run(ctx, p.rdb, []string{k.stock, k.stream}, max(qty, 0), last).Int64()
		if err != nil {
			return false, unavailable(fmt.Errorf("inventory: warm up %q: %w", sku, err))
		}
		switch set {
		case 1:
			return true, nil
		case 0:
			return false, nil
		}
	}
	return false, fmt.Errorf("%w: %q: orders kept arriving while warming up", ErrNotWarmedUp, sku)
}

// unpersistedStock returns the database's stock of sku minus the units of
// the stream entries msgs whose order the database does not have, read in
// one transaction that first locks the stock row against writers (SQLite:
// the whole database): no order of the sku commits between the two reads.
func (p *Prededuct) unpersistedStock(ctx context.Context, sku string, msgs []redis.XMessage) (int64, error) {
	var qty int64
	err := p.f.db.inTx(ctx, func(q querier) error {
		err := q.queryRow(ctx, `SELECT qty FROM stock WHERE sku = $1`+p.f.db.dialect().forShare, sku).Scan(&qty)
		switch {
		case errors.Is(err, errNoRows):
			return fmt.Errorf("%w: %q", ErrUnknownSKU, sku)
		case err != nil:
			return fmt.Errorf("inventory: warm up %q: read stock: %w", sku, err)
		}
		for _, m := range msgs {
			e, err := parseEntry(m)
			if err != nil {
				continue // a malformed entry has no units; the consumer dead-letters it
			}
			o, ok, err := orderByRequest(ctx, q, e.rid)
			if err != nil {
				return err
			}
			if !ok || o.sku != e.sku || o.qty != e.qty || o.buyer != e.buyer {
				qty -= e.qty // not persisted yet (or to be compensated, which gives the units back)
			}
		}
		return nil
	})
	return qty, err
}

// restoreBatch is how many request records one round trip restores.
const restoreBatch = 500

// restoreRequests records in Redis, for every order of sku in the
// database, its request id as sold ("0|qty|buyer", see prededuct.lua),
// keeping records Redis has: a request retried after Redis lost its data
// then replays its order instead of buying again. It runs before the stock
// key is set, while no Buy can sell the sku.
func (p *Prededuct) restoreRequests(ctx context.Context, sku string) error {
	k := p.keys(sku)
	type record struct {
		rid, buyer string
		qty        int64
	}
	var batch []record
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		_, err := p.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
			for _, o := range batch {
				pl.HSetNX(ctx, k.req, o.rid, "0|"+strconv.FormatInt(o.qty, 10)+"|"+o.buyer)
			}
			pl.PExpire(ctx, k.req, p.f.opt.RequestTTL)
			return nil
		})
		batch = batch[:0]
		if err != nil {
			return fmt.Errorf("inventory: warm up %q: restore request ids: %w", sku, err)
		}
		return nil
	}
	err := p.f.db.eachRow(ctx, func(row scanner) error {
		var r record
		if err := row.Scan(&r.rid, &r.qty, &r.buyer); err != nil {
			return err
		}
		batch = append(batch, r)
		if len(batch) == restoreBatch {
			return flush()
		}
		return nil
	}, `SELECT request_id, qty, buyer FROM orders WHERE sku = $1 ORDER BY id`, sku)
	if err != nil {
		return fmt.Errorf("inventory: warm up %q: read orders: %w", sku, err)
	}
	return flush()
}

// EnsureWarm warms a sku up if Redis has no stock for it (Redis lost its
// data, or the sku is new) and reports whether it did. Buy calls it when it
// finds the stock key missing; a server may call it from its health check.
func (p *Prededuct) EnsureWarm(ctx context.Context, sku string) (bool, error) {
	n, err := p.rdb.Exists(ctx, p.keys(sku).stock).Result()
	if err != nil {
		return false, unavailable(fmt.Errorf("inventory: %q: %w", sku, err))
	}
	if n == 1 {
		return false, nil
	}
	p.warming.Lock() // one warm-up at a time per process; WarmUp is safe across processes
	defer p.warming.Unlock()
	return p.WarmUp(ctx, sku)
}

// isNoGroup reports whether err says the stream or its group is missing.
func isNoGroup(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOGROUP") }
