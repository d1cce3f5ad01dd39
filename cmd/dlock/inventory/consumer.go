package inventory

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of ConsumerOptions.
const (
	DefaultBatch     = 64
	DefaultBlock     = time.Second
	DefaultClaimIdle = 30 * time.Second
)

// ConsumerOptions configures a Consumer.
type ConsumerOptions struct {
	// Name is the consumer's name in the group (default host-pid-random).
	Name string
	// Batch is how many entries one read takes (default 64).
	Batch int64
	// Block is how long one read waits for new entries (default 1 s).
	Block time.Duration
	// ClaimIdle: an entry delivered to some consumer and not acknowledged
	// for this long is taken over (XAUTOCLAIM): its consumer is presumed
	// dead (default 30 s). Keep it well above the time one entry takes.
	ClaimIdle time.Duration
	// Logger, if set, gets apply errors and compensations.
	Logger *slog.Logger
}

// Consumer persists prededuct's queued orders to SQL: one order row and the
// stock decrement per entry, in one transaction that also marks the request
// done in idem; XACK (and XDEL) only after the commit. An entry delivered
// twice (its consumer died between commit and XACK) finds its order and is
// just acknowledged: every pre-deducted unit becomes exactly one order. An
// entry that cannot be persisted (request id taken by another order, SQL
// stock short) is compensated once: units back to Redis, copy to the
// dead-letter stream.
type Consumer struct {
	p         *Prededuct
	name      string
	batch     int64
	block     time.Duration
	claimIdle time.Duration
	log       *slog.Logger

	applied, duplicates, compensated atomic.Int64

	afterApply func(id string) // tests: runs between the SQL commit and XACK
}

// ConsumerStats counts what a Consumer did.
type ConsumerStats struct {
	Applied     int64 // entries written to SQL
	Duplicates  int64 // entries found already written (redelivered), acknowledged
	Compensated int64 // entries that could not be persisted, compensated
}

// NewConsumer returns a consumer of p's streams.
func (p *Prededuct) NewConsumer(o ConsumerOptions) *Consumer {
	if o.Name == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		o.Name = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.Block <= 0 {
		o.Block = DefaultBlock
	}
	if o.ClaimIdle <= 0 {
		o.ClaimIdle = DefaultClaimIdle
	}
	return &Consumer{p: p, name: o.Name, batch: o.Batch, block: o.Block, claimIdle: o.ClaimIdle, log: o.Logger}
}

// Name returns the consumer's name in the group.
func (c *Consumer) Name() string { return c.name }

// Stats returns the counters.
func (c *Consumer) Stats() ConsumerStats {
	return ConsumerStats{Applied: c.applied.Load(), Duplicates: c.duplicates.Load(), Compensated: c.compensated.Load()}
}

// Run consumes the streams of skus until ctx is done, then returns nil
// after finishing the entry in hand (an entry read but not started stays
// pending and is reclaimed). Errors (SQL or Redis down) are retried.
func (c *Consumer) Run(ctx context.Context, skus ...string) error {
	for _, sku := range skus {
		if err := validSKU(sku); err != nil {
			return err
		}
		if err := ensureGroup(ctx, c.p.rdb, c.p.keys(sku).stream); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	for _, sku := range skus {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.runSKU(ctx, sku)
		}()
	}
	wg.Wait()
	return nil
}

func (c *Consumer) runSKU(ctx context.Context, sku string) {
	stream := c.p.keys(sku).stream
	c.pass(ctx, sku, "0") // entries delivered to this name before a restart
	lastClaim := time.Time{}
	for ctx.Err() == nil {
		if time.Since(lastClaim) >= c.claimIdle/2 {
			c.reclaim(ctx, sku)
			lastClaim = time.Now()
		}
		msgs, err := c.p.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: Group, Consumer: c.name, Streams: []string{stream, ">"},
			Count: c.batch, Block: min(c.block, c.claimIdle/2),
		}).Result()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, redis.Nil) {
				c.logf("read %s: %v", stream, err)
				if isNoGroup(err) {
					c.recover(ctx, sku)
				}
				_ = think(ctx, retryPause)
			}
			continue
		}
		c.processAll(ctx, sku, msgs)
	}
}

// recover recreates the stream's group and warms the sku up again after
// Redis lost its data (the group is gone): new orders can then be queued
// and read without waiting for a buyer to find the stock key missing.
func (c *Consumer) recover(ctx context.Context, sku string) {
	if err := ensureGroup(ctx, c.p.rdb, c.p.keys(sku).stream); err != nil {
		c.logf("recreate group of %s: %v", sku, err)
		return
	}
	if warmed, err := c.p.EnsureWarm(ctx, sku); err != nil {
		c.logf("warm up %s: %v", sku, err)
	} else if warmed {
		c.warnf("%s: Redis had lost the stock; warmed up again from the database", sku)
	}
}

// pass reads entries with id ("0": this consumer's pending ones, ">": new
// ones) without blocking and processes them; it reports how many it read.
func (c *Consumer) pass(ctx context.Context, sku, id string) (int, error) {
	msgs, err := c.p.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group: Group, Consumer: c.name, Streams: []string{c.p.keys(sku).stream, id},
		Count: c.batch, Block: -1,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("inventory: read stream of %q: %w", sku, err)
	}
	n := 0
	for _, s := range msgs {
		n += len(s.Messages)
	}
	return n, c.processAll(ctx, sku, msgs)
}

// reclaim takes over entries left pending by a dead consumer.
func (c *Consumer) reclaim(ctx context.Context, sku string) (int, error) {
	stream := c.p.keys(sku).stream
	start, n := "0-0", 0
	for {
		msgs, next, err := c.p.rdb.XAutoClaim(ctx, &redis.XAutoClaimArgs{
			Stream: stream, Group: Group, Consumer: c.name, MinIdle: c.claimIdle, Start: start, Count: c.batch,
		}).Result()
		if err != nil {
			if ctx.Err() == nil {
				c.logf("reclaim %s: %v", stream, err)
			}
			return n, fmt.Errorf("inventory: reclaim %s: %w", stream, err)
		}
		n += len(msgs)
		if err := c.processAll(ctx, sku, []redis.XStream{{Stream: stream, Messages: msgs}}); err != nil {
			return n, err
		}
		if next == "0-0" || next == "" || ctx.Err() != nil {
			return n, nil
		}
		start = next
	}
}

// processAll processes entries in order until ctx is done or one fails
// (it stays pending and is retried by a reclaim).
func (c *Consumer) processAll(ctx context.Context, sku string, streams []redis.XStream) error {
	for _, s := range streams {
		for _, m := range s.Messages {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := c.process(ctx, sku, m); err != nil {
				c.logf("entry %s of %s: %v", m.ID, sku, err)
				_ = think(ctx, retryPause)
				return err
			}
		}
	}
	return nil
}

// process persists one entry and acknowledges it. The SQL and Redis work
// of an entry in hand finishes even if ctx is cancelled (bounded by 10 s).
func (c *Consumer) process(ctx context.Context, sku string, m redis.XMessage) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	k := c.p.keys(sku)
	e, err := parseEntry(m)
	if err != nil {
		return c.compensate(ctx, k, entry{id: m.ID, qty: 0, rid: e.rid, buyer: e.buyer}, err.Error())
	}
	if e.sku != sku {
		return c.compensate(ctx, k, e, "entry for sku "+e.sku+" in the stream of "+sku)
	}
	reason, err := c.apply(ctx, e)
	if err != nil {
		return err
	}
	if c.afterApply != nil {
		c.afterApply(e.id)
	}
	if reason != "" {
		return c.compensate(ctx, k, e, reason)
	}
	_, err = c.p.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.XAck(ctx, k.stream, Group, e.id)
		p.XDel(ctx, k.stream, e.id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("inventory: ack %s: %w", e.id, err)
	}
	return nil
}

// errReject aborts the apply transaction of an entry that cannot be persisted.
type errReject struct{ reason string }

func (e errReject) Error() string { return e.reason }

// apply writes one entry's order; reason is non-empty when the entry cannot
// be persisted (nothing written).
func (c *Consumer) apply(ctx context.Context, e entry) (reason string, err error) {
	dup := false
	err = c.p.f.db.inTx(ctx, func(q querier) error {
		_, ok, err := insertOrder(ctx, q, e.sku, e.qty, e.buyer, e.rid)
		if err != nil {
			return err
		}
		if !ok {
			o, _, err := orderByRequest(ctx, q, e.rid)
			if err != nil {
				return err
			}
			if o.sku != e.sku || o.qty != e.qty || o.buyer != e.buyer {
				return errReject{fmt.Sprintf("request id %s belongs to order %d (%s × %d for %s)", e.rid, o.id, o.sku, o.qty, o.buyer)}
			}
			dup = true
			return nil
		}
		n, err := q.exec(ctx, `UPDATE stock SET qty = qty - $1, version = version + 1 WHERE sku = $2 AND qty >= $1`, e.qty, e.sku)
		if err != nil {
			return fmt.Errorf("inventory: persist: update stock: %w", err)
		}
		if n == 0 {
			return errReject{fmt.Sprintf("SQL stock of %s below %d", e.sku, e.qty)}
		}
		_, err = q.exec(ctx, `INSERT INTO idem (biz_key, status) VALUES ($1, 1) ON CONFLICT (biz_key) DO UPDATE SET status = 1`, bizKey(e.rid))
		return err
	})
	var rej errReject
	switch {
	case errors.As(err, &rej):
		return rej.reason, nil
	case err != nil:
		return "", err
	case dup:
		c.duplicates.Add(1)
	default:
		c.applied.Add(1)
	}
	return "", nil
}

// compensate gives an entry's units back and dead-letters it, once.
func (c *Consumer) compensate(ctx context.Context, k redisKeys, e entry, reason string) error {
	n, err := compensateScript.Run(ctx, c.p.rdb, []string{k.stream, k.stock, k.dead, k.req},
		Group, e.id, e.qty, e.rid, e.buyer, reason).Int64()
	if err != nil {
		return fmt.Errorf("inventory: compensate %s: %w", e.id, err)
	}
	if n == 1 {
		c.compensated.Add(1)
		c.warnf("compensated %s (%s × %d for %s): %s", e.id, e.sku, e.qty, e.buyer, reason)
	}
	return nil
}

// Drain persists everything queued in the streams of skus — new entries,
// this consumer's pending ones, and entries other consumers left pending
// for ClaimIdle — and returns once the streams are empty, or ctx's error.
// Use it at shutdown and before Reconcile.
func (c *Consumer) Drain(ctx context.Context, skus ...string) error {
	for _, sku := range skus {
		if err := validSKU(sku); err != nil {
			return err
		}
		if err := ensureGroup(ctx, c.p.rdb, c.p.keys(sku).stream); err != nil {
			return err
		}
		if err := c.drainSKU(ctx, sku); err != nil {
			return err
		}
	}
	return nil
}

func (c *Consumer) drainSKU(ctx context.Context, sku string) error {
	for {
		for _, id := range []string{"0", ">"} {
			for {
				n, err := c.pass(ctx, sku, id)
				if err != nil && ctx.Err() != nil {
					return fmt.Errorf("inventory: drain %q: %w", sku, ctx.Err())
				}
				if n == 0 || err != nil {
					break
				}
			}
		}
		_, _ = c.reclaim(ctx, sku)
		left, err := c.p.rdb.XLen(ctx, c.p.keys(sku).stream).Result()
		if err != nil {
			return fmt.Errorf("inventory: drain %q: %w", sku, err)
		}
		if left == 0 {
			return nil
		}
		if err := think(ctx, 20*time.Millisecond); err != nil {
			return fmt.Errorf("inventory: drain %q: %d entries left: %w", sku, left, err)
		}
	}
}

// Flush persists the entries delivered to this consumer and not yet
// acknowledged, then the entries no consumer has read yet (call it after
// Run returned), so that a graceful stop leaves nothing queued for another
// consumer to reclaim or read: the last replica to stop persists the
// stream's tail. It returns ctx's error if ctx ends first.
func (c *Consumer) Flush(ctx context.Context, skus ...string) error {
	for _, sku := range skus {
		for _, id := range []string{"0", ">"} {
			for {
				n, err := c.pass(ctx, sku, id)
				if err != nil {
					return err
				}
				if n == 0 {
					break
				}
			}
		}
	}
	return nil
}

func (c *Consumer) logf(format string, a ...any) {
	if c.log != nil {
		c.log.Error("inventory: " + fmt.Sprintf(format, a...))
	}
}

func (c *Consumer) warnf(format string, a ...any) {
	if c.log != nil {
		c.log.Warn("inventory: " + fmt.Sprintf(format, a...))
	}
}
