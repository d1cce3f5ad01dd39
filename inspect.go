package dlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Holder describes one holder of a lock, from the metadata stored with it.
type Holder struct {
	ID    string    // the first 8 hex characters of the holder's token or owner
	Host  string    // host name of the holding process
	PID   int       // its process id
	Label string    // the Client's label (WithLabel)
	Since time.Time // when it acquired (its own clock)
	Count int       // hold count (reentrant acquisitions)
	Fence int64     // the fencing token of this grant
}

// Info is what Inspect reads about one lock name.
type Info struct {
	Name      string
	Shape     string        // "mutex", "lock", ...; "" when free
	Held      bool          // held right now
	Holders   []Holder      // who holds it
	TTL       time.Duration // remaining TTL of the lock key; < 0: none
	LastFence int64         // the last fencing token granted for this name (0: none kept)
}

// Inspect reads the state of the lock called name, whatever its shape,
// without changing it. A key of an unknown shape returns ErrWrongType.
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	if err := validName(name); err != nil {
		return Info{}, fmt.Errorf("dlock: inspect: %w", err)
	}
	k := c.keys(name)
	info := Info{Name: name}
	p := c.rdb.Pipeline()
	typ := p.Type(ctx, k.lock)
	ttl := p.PTTL(ctx, k.lock)
	fence := p.Get(ctx, k.fence)
	str := p.Get(ctx, k.lock)
	hash := p.HGetAll(ctx, k.lock)
	_, _ = p.Exec(ctx)
	if err := typ.Err(); err != nil {
		return info, redisErr(ctx, "inspect", name, err)
	}
	info.TTL = ttl.Val()
	if f, err := fence.Int64(); err == nil {
		info.LastFence = f
	}
	switch typ.Val() {
	case "none":
		return info, nil
	case "string":
		token, f, meta, ok := splitMutexValue(str.Val())
		if !ok {
			break
		}
		h := parseMeta(meta)
		h.ID, h.Count, h.Fence = short(token), 1, f
		info.Shape, info.Held, info.Holders = "mutex", true, []Holder{h}
		return info, nil
	case "hash":
		m := hash.Val()
		if o, ok := m["o"]; ok {
			h := parseMeta(m["m"])
			h.ID = short(o)
			h.Count, _ = strconv.Atoi(m["n"])
			h.Fence, _ = strconv.ParseInt(m["t"], 10, 64)
			info.Shape, info.Held, info.Holders = "lock", true, []Holder{h}
			return info, nil
		}
	}
	return info, fmt.Errorf("dlock: inspect %q: %w: %s", name, ErrWrongType, typ.Val())
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
func parseMeta(meta string) Holder {
	parts := strings.SplitN(meta, "|", 4)
	for len(parts) < 4 {
		parts = append(parts, "")
	}
	var h Holder
	h.Host = parts[0]
	h.PID, _ = strconv.Atoi(parts[1])
	if ms, err := strconv.ParseInt(parts[2], 10, 64); err == nil {
		h.Since = time.UnixMilli(ms)
	}
	h.Label = parts[3]
	return h
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
