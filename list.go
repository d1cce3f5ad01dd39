package dlock

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/dlockgo/dlock/seam"

	"github.com/redis/go-redis/v9"
)

// listScanCount is the COUNT hint of each SCAN call of List and ForceUnlock.
const listScanCount = 1000

// List inspects the locks it found listBatch in a call, listWorkers calls
// at once.
const (
	listBatch   = 100
	listWorkers = 4
)

// List returns the held locks whose names match pattern, oldest first (by
// Info.Oldest; unknown ages last, ties by name), so a stuck holder stands
// out. The pattern is a Redis glob over lock
// names ("stock:*", "order:1?", "*"; "" means "*"); use '\' to match '*',
// '?', '[' or '\' literally.
//
// List finds keys with SCAN (never KEYS, so it does not block Redis), on every
// master of a Cluster client: a lock is found by its key <prefix>{name} or
// by any of its <prefix>{name}:* keys but the fence counter (an RWLock held
// by readers only has no main key). It reads each lock found as Inspect
// does, 100 locks in one script call (on a Cluster: in one pipeline), 4
// calls at once. Keys that are not locks of a known shape are left out, as are locks freed while List runs; SCAN may miss a lock created
// while it runs. A pattern longer than seam.MaxNameLen returns
// ErrInvalidArgument. On a Redis error List returns it and no Info.
func (c *Client) List(ctx context.Context, pattern string) ([]Info, error) {
	return c.listing(nil).List(ctx, pattern)
}

// listing is how List finds and reads the Client's locks (seam.Listing);
// scanned, if not nil, is told what each SCAN found (see scanLocks).
func (c *Client) listing(scanned func(alone map[string]bool)) seam.Listing[Info] {
	return seam.Listing[Info]{
		Names: func(ctx context.Context, glob string) ([]string, error) {
			found, err := c.scanLocks(ctx, glob)
			if err == nil && scanned != nil {
				scanned(found)
			}
			return slices.Collect(maps.Keys(found)), redisCause(err)
		},
		// A lock costs Redis its four inspect scripts, not a round trip.
		Inspect: c.Inspect, InspectBatch: c.inspectBatch, Batch: listBatch, Workers: listWorkers,
		Held: func(i Info) bool { return i.Held }, Oldest: Info.Oldest, Name: func(i Info) string { return i.Name },
	}
}

// scanLocks SCANs for the keys of the locks whose names match glob (on
// every master of a cluster): the lock key <prefix>{name} and the keys
// <prefix>{name}:suffix (a slot's fence counter, <prefix>fence:{tag}, names
// no lock; the name ends at the key's last '}': no suffix holds one). It
// returns, by lock name, whether the lock key was the only key of the lock
// found.
func (c *Client) scanLocks(ctx context.Context, glob string) (map[string]bool, error) {
	var mu sync.Mutex
	found := make(map[string]bool)
	err := c.scanKeys(ctx, seam.QuoteGlob(c.prefix)+"{"+glob+"}*", func(key string) {
		rest, ok := strings.CutPrefix(key, c.prefix)
		end := strings.LastIndexByte(rest, '}')
		if !ok || len(rest) < 3 || rest[0] != '{' || end < 2 {
			return
		}
		suffix := rest[end+1:]
		if suffix != "" && suffix[0] != ':' {
			return
		}
		name := rest[1:end]
		mu.Lock()
		alone, seen := found[name]
		found[name] = suffix == "" && (alone || !seen)
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	return found, nil
}

// scanKeys calls found for every key matching match, on every master of a
// cluster client (concurrently: found must be safe for concurrent use).
// A key may be reported more than once.
func (c *Client) scanKeys(ctx context.Context, match string, found func(string)) error {
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			return scanNode(ctx, node, match, found)
		})
	}
	return scanNode(ctx, c.rdb, match, found)
}

func scanNode(ctx context.Context, rdb redis.Cmdable, match string, found func(string)) error {
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, match, listScanCount).Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			found(k)
		}
		if next == 0 {
			return nil
		}
		cursor = next
	}
}

// listInspect is Inspect of many locks in one call (lua/list_inspect.lua):
// each shape's inspect script made a local function of its keys, before
// the loop over the locks.
var listInspect = func() *luaScript {
	var fns strings.Builder
	names := make([]string, len(inspectors))
	for i, in := range inspectors {
		names[i] = fmt.Sprintf("inspect_%d", i+1)
		fmt.Fprintf(&fns, "local function %s(KEYS)\n%s\nend\n", names[i], in.script.body)
	}
	fmt.Fprintf(&fns, "local inspectors = {%s}\n", strings.Join(names, ", "))
	body := fns.String() + readLua("list_inspect.lua")
	var src strings.Builder
	for _, l := range []string{"lib.lua", "rw_lib.lua", "inspect_lib.lua"} {
		src.WriteString(readLua(l))
		src.WriteString("\n")
	}
	src.WriteString(body)
	return newLuaScript("list_inspect.lua", body, src.String())
}()

// inspectBatch is Inspect of every one of names (valid names): in one
// script call, or on a Cluster (whose script calls take the keys of one
// slot) and when that call fails, as inspectMany does.
func (c *Client) inspectBatch(ctx context.Context, names []string) ([]Info, []error) {
	if _, ok := c.rdb.(*redis.ClusterClient); ok {
		return c.inspectMany(ctx, names)
	}
	counts := make([]any, len(inspectors))
	var keys []string
	for i, name := range names {
		for j, in := range inspectors {
			k := in.keys(c, name)
			if i == 0 {
				counts[j] = len(k)
			}
			keys = append(keys, k...)
		}
	}
	replies, err := c.scripts.run(ctx, listInspect.call(keys, counts...)).Slice()
	if err != nil || len(replies) != len(names) {
		return c.inspectMany(ctx, names) // which says why, name by name
	}
	infos, errs := make([]Info, len(names)), make([]error, len(names))
	for i, name := range names {
		if v, ok := replies[i].([]any); ok {
			infos[i], errs[i] = parseInspect(name, v)
		} else {
			infos[i], errs[i] = Info{Name: name}, noShape(name)
		}
	}
	return infos, errs
}
