package dlock

import (
	"cmp"
	"context"
	"fmt"
	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/seam"
	"strconv"
	"strings"
	"time"
)

// Inspect reads the state of the lock called name, whatever its shape,
// without changing it. A key of an unknown shape returns ErrWrongType.
func (c *Client) Inspect(ctx context.Context, name string) (seam.Info, error) {
	if err := seam.CheckName(name); err != nil {
		return seam.Info{}, wrap("inspect", "", name, err)
	}
	k := c.keys(name)
	fk := c.queueKeys(name)
	rk := (&RWLock{c: c, name: name}).keys()
	sk := (&Semaphore{c: c, name: name}).keys()
	info := seam.Info{Name: name}
	p := c.rdb.Pipeline()
	now := serverTime.call([]string{k.lock}).queue(ctx, p, true)
	typ := p.Type(ctx, k.lock)
	ttl := p.PTTL(ctx, k.lock)
	fence := p.Get(ctx, k.fence)
	str := p.Get(ctx, k.lock)
	hash := p.HGetAll(ctx, k.lock)
	zset := p.ZRangeWithScores(ctx, k.lock, 0, -1)
	permits := p.HGetAll(ctx, sk.data)
	count := p.Get(ctx, sk.count)
	queue := p.ZRange(ctx, fk.queue, 0, -1)
	timeouts := p.ZRangeWithScores(ctx, fk.timeouts, 0, -1)
	readers := p.ZRangeWithScores(ctx, rk.readers, 0, -1)
	rholds := p.HGetAll(ctx, rk.holds)
	writers := p.ZRangeWithScores(ctx, rk.writers, 0, -1)
	_, _ = p.Exec(ctx)
	if err := typ.Err(); err != nil {
		return info, redisErr(ctx, "inspect", "", name, err)
	}
	nowMs, err := now.Int64()
	if err != nil {
		return info, redisErr(ctx, "inspect", "", name, err)
	}
	left := func(score float64) time.Duration { return time.Duration(int64(score)-nowMs) * time.Millisecond }
	info.TTL = ttl.Val()
	if f, err := fence.Int64(); err == nil {
		info.LastFence = f
	}
	switch typ.Val() {
	case "none":
	case "string":
		token, f, meta, ok := splitMutexValue(str.Val())
		if !ok {
			return info, wrap("inspect", "", name, fmt.Errorf("%w: string", ErrWrongType))
		}
		h := parseMeta(meta)
		h.ID, h.Count, h.Fence, h.TTL = ids.Short(token), 1, f, info.TTL
		info.Shape, info.Held, info.Holders = "mutex", true, []seam.Holder{h}
	case "hash":
		m := hash.Val()
		o, ok := m["o"]
		if !ok {
			return info, wrap("inspect", "", name, fmt.Errorf("%w: hash", ErrWrongType))
		}
		h := parseMeta(m["m"])
		h.ID, h.TTL = ids.Short(o), info.TTL
		h.Count, _ = strconv.Atoi(m["n"])
		h.Fence, _ = strconv.ParseInt(m["t"], 10, 64)
		info.Shape = cmp.Or(m["s"], "lock")
		if info.Shape == "rw" {
			h.Mode = "write"
		}
		info.Held, info.Holders = true, []seam.Holder{h}
	case "zset":
		data := permits.Val()
		info.Shape = "semaphore"
		info.Permits, _ = strconv.Atoi(count.Val())
		for _, z := range zset.Val() {
			id, _ := z.Member.(string)
			if left(z.Score) <= 0 {
				continue
			}
			f, meta, _ := strings.Cut(data[id], "|")
			h := parseMeta(meta)
			h.ID, h.Count, h.TTL = ids.Short(id), 1, left(z.Score)
			h.Fence, _ = strconv.ParseInt(f, 10, 64)
			info.Holders = append(info.Holders, h)
		}
		info.Held = len(info.Holders) > 0
	default:
		return info, wrap("inspect", "", name, fmt.Errorf("%w: %s", ErrWrongType, typ.Val()))
	}
	// RWLock readers (each with its own lease) and waiting writers.
	for _, z := range readers.Val() {
		owner, _ := z.Member.(string)
		parts := strings.SplitN(rholds.Val()[owner], "|", 4)
		if left(z.Score) <= 0 || len(parts) < 4 {
			continue
		}
		h := parseMeta(parts[3])
		h.ID, h.Mode, h.TTL = ids.Short(owner), "read", left(z.Score)
		h.Count, _ = strconv.Atoi(parts[0])
		h.Fence, _ = strconv.ParseInt(parts[2], 10, 64)
		info.Shape, info.Held = cmp.Or(info.Shape, "rw"), true
		info.Holders = append(info.Holders, h)
	}
	for _, z := range writers.Val() {
		if w, ok := queueWaiter(z.Member, left(z.Score)); ok {
			w.Mode = "write"
			info.Shape = cmp.Or(info.Shape, "rw")
			info.Queue = append(info.Queue, w)
		}
	}
	// FairLock queue, in arrival order.
	deadlines := make(map[string]time.Duration)
	for _, z := range timeouts.Val() {
		m, _ := z.Member.(string)
		deadlines[m] = left(z.Score)
	}
	for _, m := range queue.Val() {
		if w, ok := queueWaiter(m, deadlines[m]); ok {
			info.Shape = cmp.Or(info.Shape, "fair")
			info.Queue = append(info.Queue, w)
		}
	}
	return info, nil
}

// queueWaiter reads a queue member (op|owner|lease-ms|client|holder
// metadata) that has left of its deadline; false if it is past its deadline
// or malformed.
func queueWaiter(member any, left time.Duration) (seam.Waiter, bool) {
	m, _ := member.(string)
	parts := strings.SplitN(m, "|", 5)
	if left <= 0 || len(parts) < 5 {
		return seam.Waiter{}, false
	}
	h := parseMeta(parts[4])
	return seam.Waiter{ID: ids.Short(parts[1]), Host: h.Host, PID: h.PID, Label: h.Label, Since: h.Since, Deadline: left}, true
}

// splitMutexValue splits token|fence|meta.
func splitMutexValue(v string) (token string, fence int64, meta string, ok bool) {
	parts := strings.SplitN(v, "|", 3)
	if len(parts) != 3 {
		return "", 0, "", false
	}
	f, err := strconv.ParseInt(parts[1], 10, 64)
	return parts[0], f, parts[2], err == nil
}

// parseMeta reads host|pid|acquired-at-ms|label.
func parseMeta(meta string) seam.Holder {
	parts := strings.SplitN(meta, "|", 4)
	for len(parts) < 4 {
		parts = append(parts, "")
	}
	var h seam.Holder
	h.Host = parts[0]
	h.PID, _ = strconv.Atoi(parts[1])
	if ms, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
		h.Since = time.UnixMilli(ms)
	}
	h.Label = parts[3]
	return h
}
