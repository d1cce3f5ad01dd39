package inventory

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/prededuct.lua
	predeductLua string
	//go:embed lua/compensate.lua
	compensateLua string

	predeductScript  = redis.NewScript(predeductLua)
	compensateScript = redis.NewScript(compensateLua)
)

// Group is the consumer group that persists prededuct's order streams.
const Group = "persist"

// Prededuct is 000 §3.3 C: the stock is warmed up into Redis and each Buy
// runs one Lua script that checks the stock, decrements it, queues the
// order in the sku's Redis Stream and remembers the request id — all or
// nothing, so it never oversells (may undersell if an order cannot be
// persisted, and then gives the units back). The script's -2 (stock key
// missing) is never "sold out": Buy then warms the sku up from the database
// (see WarmUp: Redis lost its data, or the sku is new) and runs it again;
// if that fails too it is ErrNotWarmedUp, a system error. Orders
// reach SQL asynchronously through a Consumer (consumer group Group, XACK
// after the SQL commit, XAUTOCLAIM of entries a dead consumer left pending),
// idempotently through the orders' UNIQUE request_id and the idem table.
//
// Keys, per sku, all with the sku as hash tag (one slot per sku on Redis
// Cluster): <prefix>{sku}:stock, :req (request ids), :orders (the stream),
// :dead (entries that could not be persisted).
type Prededuct struct {
	f       sqlFrame
	rdb     redis.UniversalClient
	warming sync.Mutex // serializes this process's re-warm-ups
}

// NewPrededuct returns the prededuct strategy on st and rdb. Call WarmUp
// for each sku before selling it, and run a Consumer.
func NewPrededuct(st Store, rdb redis.UniversalClient, o Options) (*Prededuct, error) {
	if rdb == nil {
		return nil, fmt.Errorf("%w: prededuct needs a Redis client", ErrInvalidInput)
	}
	if strings.ContainsAny(o.RedisPrefix, "{}") {
		return nil, fmt.Errorf("%w: redis prefix %q contains a brace", ErrInvalidInput, o.RedisPrefix)
	}
	f, err := newFrame(st, o)
	if err != nil {
		return nil, err
	}
	return &Prededuct{f: f, rdb: rdb}, nil
}

// Name returns "prededuct".
func (p *Prededuct) Name() string { return "prededuct" }

// redisKeys are one sku's keys.
type redisKeys struct{ stock, req, stream, dead string }

func (p *Prededuct) keys(sku string) redisKeys {
	base := p.f.opt.RedisPrefix + "{" + sku + "}:"
	return redisKeys{stock: base + "stock", req: base + "req", stream: base + "orders", dead: base + "dead"}
}

// StockKey returns the Redis key holding a sku's pre-deduct stock.
func (p *Prededuct) StockKey(sku string) string { return p.keys(sku).stock }

// Buy: see Strategy. A sale is Queued: its order row is written by a
// Consumer; OrderID is 0. An error that says Redis or the database could not
// be reached wraps ErrUnavailable.
func (p *Prededuct) Buy(ctx context.Context, sku string, qty int64, buyer, requestID string) (_ Result, err error) {
	defer func() { err = unavailable(err) }()
	if err := p.f.opt.validate(sku, qty, buyer, requestID); err != nil {
		return failed(err)
	}
	return p.buy(ctx, sku, qty, buyer, requestID, true)
}

// buy runs the pre-deduct script; when it finds no stock key and rewarm is
// set, it warms the sku up from the database and tries once more.
func (p *Prededuct) buy(ctx context.Context, sku string, qty int64, buyer, requestID string, rewarm bool) (Result, error) {
	k := p.keys(sku)
	v, err := predeductScript.Run(ctx, p.rdb, []string{k.stock, k.req, k.stream},
		qty, requestID, buyer, sku, p.f.opt.RequestTTL.Milliseconds()).Slice()
	if err != nil {
		return failed(fmt.Errorf("inventory: prededuct %q: %w", sku, err))
	}
	if len(v) != 2 {
		return failed(fmt.Errorf("inventory: prededuct %q: unexpected reply %v", sku, v))
	}
	code, _ := v[0].(int64)
	switch code {
	case 1:
		left, _ := v[1].(int64)
		return Result{Outcome: Sold, Left: left, Queued: true}, nil
	case -1:
		return Result{Outcome: SoldOut, Left: 0}, nil
	case -2:
		if rewarm {
			if _, err := p.EnsureWarm(ctx, sku); err != nil {
				if errors.Is(err, ErrUnknownSKU) || errors.Is(err, ErrInvalidInput) {
					return failed(err)
				}
				return failed(fmt.Errorf("%w: %q (key %s missing): %w", ErrNotWarmedUp, sku, k.stock, err))
			}
			return p.buy(ctx, sku, qty, buyer, requestID, false)
		}
		return failed(fmt.Errorf("%w: %q (key %s missing)", ErrNotWarmedUp, sku, k.stock))
	case 2:
		prior, _ := v[1].(string)
		return priorResult(prior, qty, buyer, requestID)
	}
	return failed(fmt.Errorf("inventory: prededuct %q: unexpected reply %v", sku, v))
}

// priorResult decodes a request hash entry "left|qty|buyer".
func priorResult(prior string, qty int64, buyer, requestID string) (Result, error) {
	parts := strings.SplitN(prior, "|", 3)
	if len(parts) != 3 {
		return failed(fmt.Errorf("inventory: prededuct: bad request record %q", prior))
	}
	left, err1 := strconv.ParseInt(parts[0], 10, 64)
	q, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return failed(fmt.Errorf("inventory: prededuct: bad request record %q", prior))
	}
	if q != qty || parts[2] != buyer {
		return failed(fmt.Errorf("%w: request id %q was used for another purchase", ErrInvalidInput, requestID))
	}
	switch {
	case left >= 0:
		return Result{Outcome: Sold, Left: -1, Queued: true, Replayed: true}, nil
	case left == -1:
		return Result{Outcome: SoldOut, Left: 0, Replayed: true}, nil
	}
	r, err := failed(fmt.Errorf("%w: request %q", ErrNotPersisted, requestID))
	r.Replayed = true
	return r, err
}

// WarmUpAll warms up every sku of the store and returns them.
func (p *Prededuct) WarmUpAll(ctx context.Context) ([]string, error) {
	skus, err := p.f.store.SKUs(ctx)
	if err != nil {
		return nil, err
	}
	for _, sku := range skus {
		if _, err := p.WarmUp(ctx, sku); err != nil {
			return nil, err
		}
	}
	return skus, nil
}

// ensureGroup creates the stream and its consumer group if missing.
func ensureGroup(ctx context.Context, rdb redis.UniversalClient, stream string) error {
	err := rdb.XGroupCreateMkStream(ctx, stream, Group, "0").Err()
	if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
		return fmt.Errorf("inventory: create group on %s: %w", stream, err)
	}
	return nil
}

// queued returns the entries still in a sku's stream (not yet persisted:
// persisted entries are deleted) and their units.
func (p *Prededuct) queued(ctx context.Context, sku string) (entries, units int64, err error) {
	msgs, err := p.rdb.XRange(ctx, p.keys(sku).stream, "-", "+").Result()
	if err != nil {
		return 0, 0, fmt.Errorf("inventory: read stream of %q: %w", sku, err)
	}
	for _, m := range msgs {
		e, err := parseEntry(m)
		if err != nil {
			continue // a malformed entry has no units to count
		}
		units += e.qty
	}
	return int64(len(msgs)), units, nil
}

// Reconcile: see Strategy. It adds Redis to the SQL books: the stock left
// in Redis plus the units still queued must equal SQL's stock.
func (p *Prededuct) Reconcile(ctx context.Context, sku string) (Report, error) {
	r, err := Reconcile(ctx, p.f.store, sku)
	if err != nil {
		return r, err
	}
	k := p.keys(sku)
	r.Redis = true
	r.RedisQty, err = p.rdb.Get(ctx, k.stock).Int64()
	if errors.Is(err, redis.Nil) {
		r.RedisMissing, r.RedisQty = true, 0
	} else if err != nil {
		return r, unavailable(fmt.Errorf("inventory: reconcile %q: %w", sku, err))
	}
	if _, r.Pending, err = p.queued(ctx, sku); err != nil {
		return r, unavailable(err)
	}
	if r.DeadLetters, err = p.rdb.XLen(ctx, k.dead).Result(); err != nil {
		return r, unavailable(fmt.Errorf("inventory: reconcile %q: %w", sku, err))
	}
	if r.RedisMissing {
		// Not an undersale: Redis has no stock to compare (it lost its
		// data, or the sku was never warmed up); the next order or the
		// consumer warms it up from the database.
		r.problem("redis has no stock for %s (%s missing: Redis lost its data, or the sku was never warmed up); "+
			"it is warmed up from the database by the next order", sku, k.stock)
		if r.DeadLetters > 0 {
			r.problem("%d orders could not be persisted (dead letters, units returned)", r.DeadLetters)
		}
		return r, nil
	}
	diff := r.Qty - r.Pending - r.RedisQty
	r.Undersold, r.RedisExcess = max(0, diff), max(0, -diff)
	if r.Undersold > 0 {
		r.problem("undersold: %d units taken in Redis are neither queued nor ordered", r.Undersold)
	}
	if r.RedisExcess > 0 {
		r.problem("redis holds %d units more than SQL minus the queue", r.RedisExcess)
	}
	if r.DeadLetters > 0 {
		r.problem("%d orders could not be persisted (dead letters, units returned)", r.DeadLetters)
	}
	return r, nil
}

// entry is one queued order.
type entry struct {
	id, sku, buyer, rid string
	qty                 int64
}

func parseEntry(m redis.XMessage) (entry, error) {
	e := entry{id: m.ID}
	e.sku, _ = m.Values["sku"].(string)
	e.buyer, _ = m.Values["buyer"].(string)
	e.rid, _ = m.Values["rid"].(string)
	qs, _ := m.Values["qty"].(string)
	var err error
	e.qty, err = strconv.ParseInt(qs, 10, 64)
	if err != nil || e.sku == "" || e.buyer == "" || e.rid == "" || e.qty <= 0 {
		return e, fmt.Errorf("inventory: malformed stream entry %s: %v", m.ID, m.Values)
	}
	return e, nil
}

// retryPause is how long the consumer pauses after an error.
const retryPause = 200 * time.Millisecond
