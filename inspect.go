package dlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock/internal/ids"
)

// inspectors are asked in this order; the first that recognises the name's
// keys answers (the last answers for a free name).
var inspectors = []inspector{rwInspector, semInspector, reentrantInspector, mutexInspector}

// Inspect reads the state of the lock called name, whatever its shape,
// without changing it: every shape's inspector is asked (one round trip),
// and the first that recognises the keys answers. A key no shape
// recognises returns ErrWrongType.
func (c *Client) Inspect(ctx context.Context, name string) (Info, error) {
	if err := checkCall(ctx, name); err != nil {
		return Info{}, wrap("inspect", "", name, err)
	}
	infos, errs := c.inspectMany(ctx, []string{name})
	return infos[0], errs[0]
}

// inspectMany is Inspect of every one of names (valid names), all in one
// pipeline: an answer and an error per name.
func (c *Client) inspectMany(ctx context.Context, names []string) ([]Info, []error) {
	calls := make([]scriptCall, 0, len(names)*len(inspectors))
	for _, name := range names {
		for _, in := range inspectors {
			calls = append(calls, in.script.call(in.keys(c, name)))
		}
	}
	cmds := c.scripts.pipelined(ctx, c.rdb.Pipeline, calls, nil)
	infos, errs := make([]Info, len(names)), make([]error, len(names))
	for i, name := range names {
		infos[i], errs[i] = inspectReply(ctx, name, cmds[i*len(inspectors):(i+1)*len(inspectors)])
	}
	return infos, errs
}

// inspectReply reads the inspectors' replies about name: the first that
// recognised its keys answers.
func inspectReply(ctx context.Context, name string, cmds []*redis.Cmd) (Info, error) {
	for _, cmd := range cmds {
		v, err := cmd.Slice()
		switch {
		case isNil(err):
			continue
		case err != nil:
			return Info{Name: name}, redisErr(ctx, "inspect", "", name, err)
		}
		return parseInspect(name, v)
	}
	return Info{Name: name}, noShape(name)
}

// noShape is Inspect's error for a name whose keys are of no lock shape.
func noShape(name string) error {
	return wrap("inspect", "", name, fmt.Errorf("%w: a key of no lock shape", ErrWrongType))
}

// parseInspect reads a normalized inspect reply (lua/inspect_lib.lua).
func parseInspect(name string, v []any) (Info, error) {
	r := reply{v: v}
	info := Info{Name: name, Shape: r.str(), TTL: r.ms(), LastFence: r.int(), Permits: int(r.int())}
	for range r.int() {
		id, meta, count, fence, mode, ttl := r.str(), r.str(), int(r.int()), r.int(), r.str(), r.ms()
		h := parseMeta(meta)
		h.ID, h.Count, h.Fence, h.Mode, h.TTL = ids.Short(id), count, fence, mode, ttl
		info.Holders = append(info.Holders, h)
	}
	for range r.int() {
		id, meta, mode, deadline := r.str(), r.str(), r.str(), r.ms()
		h := parseMeta(meta)
		info.Queue = append(info.Queue, Waiter{ID: ids.Short(id), Host: h.Host, PID: h.PID, Label: h.Label, Since: h.Since, Mode: mode, Deadline: deadline})
	}
	info.Held = len(info.Holders) > 0
	if r.bad {
		return info, wrap("inspect", "", name, fmt.Errorf("unexpected inspect reply %v", v))
	}
	return info, nil
}

// reply reads a script's array reply in order; bad records a short or
// malformed one.
type reply struct {
	v   []any
	i   int
	bad bool
}

func (r *reply) next() any {
	if r.i >= len(r.v) {
		r.bad = true
		return nil
	}
	r.i++
	return r.v[r.i-1]
}

func (r *reply) str() string {
	s, ok := r.next().(string)
	r.bad = r.bad || !ok
	return s
}

func (r *reply) int() int64 {
	n, ok := r.next().(int64)
	r.bad = r.bad || !ok
	return n
}

// ms reads milliseconds; a negative count (no TTL) reads as -1.
func (r *reply) ms() time.Duration {
	n := r.int()
	if n < 0 {
		return -1
	}
	return time.Duration(n) * time.Millisecond
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
