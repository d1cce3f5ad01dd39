package dlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/seam"

	"github.com/redis/go-redis/v9"
)

// listScanCount is the COUNT hint of each SCAN call of List and ForceUnlock.
const listScanCount = 1000

// listWorkers bounds the Inspect calls List runs at once.
const listWorkers = 16

// List returns the held locks whose names match pattern, oldest first (by
// the earliest Since of their holders; holders of unknown age last, ties by
// name), so a stuck holder stands out. The pattern is a Redis glob over lock
// names ("stock:*", "order:1?", "*"; "" means "*"); use '\' to match '*',
// '?', '[' or '\' literally.
//
// List finds keys with SCAN (never KEYS, so it does not block Redis), on every
// master of a Cluster client: a lock is found by its key <prefix>{name} or
// by any of its <prefix>{name}:* keys but the fence counter (an RWLock held
// by readers only has no main key). It reads each lock found as Inspect
// does. Keys that are not locks of a known shape are left out, as are locks
// freed while List runs; SCAN may miss a lock created while it runs. A pattern longer than
// seam.MaxNameLen returns ErrInvalidArgument. On a Redis error List returns it and
// no Info.
func (c *Client) List(ctx context.Context, pattern string) ([]Info, error) {
	if err := seam.CheckContext(ctx); err != nil {
		return nil, wrap("list", "", pattern, err)
	}
	if pattern == "" {
		pattern = "*"
	}
	if len(pattern) > seam.MaxNameLen {
		return nil, wrap("list", "", pattern, fmt.Errorf("%w: pattern of %d bytes (want at most %d)", ErrInvalidArgument, len(pattern), seam.MaxNameLen))
	}
	names, err := c.scanLockNames(ctx, escapeGlob(c.prefix)+"{"+pattern+"}*")
	if err != nil {
		return nil, wrap("list", "", pattern, err)
	}
	infos, err := c.inspectAll(ctx, names)
	if err != nil {
		return nil, wrap("list", "", pattern, err) // an Inspect's error names its lock already
	}
	slices.SortFunc(infos, func(a, b Info) int {
		sa, sb := oldestSince(a), oldestSince(b)
		switch {
		case sa.IsZero() != sb.IsZero():
			if sa.IsZero() {
				return 1
			}
			return -1
		case !sa.Equal(sb):
			return sa.Compare(sb)
		}
		return strings.Compare(a.Name, b.Name)
	})
	return infos, nil
}

// oldestSince returns the earliest known Since of info's holders.
func oldestSince(info Info) time.Time {
	var t time.Time
	for _, h := range info.Holders {
		if !h.Since.IsZero() && (t.IsZero() || h.Since.Before(t)) {
			t = h.Since
		}
	}
	return t
}

// scanLockNames SCANs for keys matching match (on every master of a
// cluster) and returns the lock names of the keys <prefix>{name} and
// <prefix>{name}:suffix (a slot's fence counter, <prefix>fence:{tag}, names
// no lock). The name ends at the key's last '}' (no suffix holds one).
func (c *Client) scanLockNames(ctx context.Context, match string) ([]string, error) {
	var mu sync.Mutex
	seen := make(map[string]struct{})
	err := c.scanKeys(ctx, match, func(key string) {
		rest, ok := strings.CutPrefix(key, c.prefix)
		end := strings.LastIndexByte(rest, '}')
		if !ok || len(rest) < 3 || rest[0] != '{' || end < 2 {
			return
		}
		if suffix := rest[end+1:]; suffix != "" && suffix[0] != ':' {
			return
		}
		mu.Lock()
		seen[rest[1:end]] = struct{}{}
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	return names, nil
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

// inspectAll inspects names with up to listWorkers calls at once and returns
// the held ones; locks of an unknown shape are left out.
func (c *Client) inspectAll(parent context.Context, names []string) ([]Info, error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	todo := make(chan string)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		infos []Info
	)
	for range min(listWorkers, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range todo {
				info, err := c.Inspect(ctx, name)
				switch {
				case errors.Is(err, ErrWrongType), errors.Is(err, ErrInvalidName):
				case err != nil:
					cancel(err)
				case info.Held:
					mu.Lock()
					infos = append(infos, info)
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for _, n := range names {
		select {
		case todo <- n:
		case <-ctx.Done():
			break feed
		}
	}
	close(todo)
	wg.Wait()
	if err := parent.Err(); err != nil {
		return nil, err
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err // an Inspect error, naming its lock
	}
	return infos, nil
}

// escapeGlob escapes the characters special to Redis glob patterns.
func escapeGlob(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
