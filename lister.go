package dlock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Lister is List for a caller that lists again and again, as a live view
// of the locks does (dlock top): its List returns what Client.List returns,
// but a Mutex, Lock or FairLock its last List returned that nobody waits
// for (SCAN found no key of it but the lock key) and that still holds the
// same grant (the same fencing token and re-entry count) is not read whole
// again: its Info is the last one with its lease read anew, and its
// LastFence (the counter of the lock's hash slot) the one read before. That
// check costs Redis two commands where reading a lock whole costs about
// twenty, so a view of many held locks loads the service little between
// their changes. A waiter that queues while List runs may show in the next
// List only. Locks with waiters, readers or permits are read whole every
// time; on a Cluster client every lock is.
//
// A Lister's List calls run one at a time; it is safe for concurrent use.
// A List that fails leaves what the Lister knew for the next.
type Lister struct {
	c       *Client
	mu      sync.Mutex
	last    map[string]known // the locks the last List returned, by name
	spare   map[string]known // the map of the List before, cleared: the next List's
	foreign []string         // the names the last List found of no lock shape
}

// known is a lock as a Lister's last List returned it, and the grant
// list_check.lua compares it with ("": it is read whole next time).
type known struct {
	info  Info
	grant string
}

// NewLister returns a Lister of the Client's locks.
func (c *Client) NewLister() *Lister {
	return &Lister{c: c}
}

// List returns the held locks whose names match pattern, as Client.List
// does (the same order, errors and bad input).
func (l *Lister) List(ctx context.Context, pattern string) ([]Info, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var mu sync.Mutex
	var alone map[string]bool
	var foreign []string
	next := l.spare
	if next == nil {
		next = make(map[string]known, len(l.last))
	}
	list := l.c.listing(func(found map[string]bool) { alone = found })
	list.InspectBatch = func(ctx context.Context, names []string) ([]Info, []error) {
		// l.last and alone are only read while the batches run.
		infos, errs, grants := l.c.inspectAgain(ctx, names, func(name string) known {
			if !alone[name] {
				return known{}
			}
			return l.last[name]
		})
		mu.Lock()
		for i, n := range names {
			switch {
			case errors.Is(errs[i], ErrWrongType):
				foreign = append(foreign, n)
			case errs[i] == nil && infos[i].Held:
				if grants[i] == "" {
					grants[i] = checkable(infos[i])
				}
				next[n] = known{infos[i], grants[i]}
			}
		}
		mu.Unlock()
		return infos, errs
	}
	infos, err := list.List(ctx, pattern)
	if err != nil {
		clear(next)
		l.spare = next
		return nil, err
	}
	slices.Sort(foreign)
	clear(l.last)
	l.last, l.spare, l.foreign = next, l.last, foreign
	return infos, nil
}

// Foreign returns the names, sorted, that the last List found under the
// Client's prefix and matching its pattern whose keys are of no lock shape
// (Inspect says ErrWrongType: written by something else, or by another
// version): List leaves them out.
func (l *Lister) Foreign() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.foreign)
}

// listCheck is a Lister's check of the locks it read before.
var listCheck = withLibs("list_check.lua")

// inspectAgain is inspectBatch for a Lister: a lock whose last Info says
// it was a Mutex, Lock or FairLock held by one holder with no waiters is
// checked (lua/list_check.lua), and if it still holds that grant its Info
// is that one with its TTL read now, and grants has that grant at its
// index; every other lock is read whole ("" in grants). On a Cluster, and
// when the check fails, every lock is read whole.
func (c *Client) inspectAgain(ctx context.Context, names []string, last func(name string) known) (infos []Info, errs []error, grants []string) {
	keys, args := make([]string, 0, len(names)), make([]any, 0, len(names))
	checked := make([]int, 0, len(names)) // the indexes of the names checked
	was := make([]known, len(names))
	if _, ok := c.rdb.(*redis.ClusterClient); !ok {
		for i, name := range names {
			if was[i] = last(name); was[i].grant != "" {
				keys, args, checked = append(keys, c.lockKey(name)), append(args, was[i].grant), append(checked, i)
			}
		}
	}
	infos, errs, grants = make([]Info, len(names)), make([]error, len(names)), make([]string, len(names))
	if len(checked) > 0 {
		ttls, err := c.scripts.run(ctx, listCheck.call(keys, args...)).Int64Slice()
		if err == nil && len(ttls) == len(checked) {
			holders := make([]Holder, len(checked)) // one block for the batch
			for j, i := range checked {
				if ttl := ttls[j]; ttl >= -1 {
					infos[i], grants[i] = was[i].info.withTTL(ttl, holders[j:j+1:j+1]), was[i].grant
				}
			}
		}
	}
	var whole []string
	var at []int
	for i, name := range names {
		if grants[i] == "" {
			whole, at = append(whole, name), append(at, i)
		}
	}
	if len(whole) > 0 {
		wi, we := c.inspectBatch(ctx, whole)
		for j, i := range at {
			infos[i], errs[i] = wi[j], we[j]
		}
	}
	return infos, errs, grants
}

// checkable returns the grant list_check.lua compares info's lock with
// ("s<fence>" or "h<fence>|<count>"), or "" when the lock is read whole.
func checkable(info Info) string {
	if len(info.Holders) != 1 || len(info.Queue) != 0 {
		return ""
	}
	h := info.Holders[0]
	switch info.Shape {
	case "mutex":
		return "s" + strconv.FormatInt(h.Fence, 10)
	case "lock", "fair":
		return "h" + strconv.FormatInt(h.Fence, 10) + "|" + strconv.Itoa(h.Count)
	}
	return ""
}

// withTTL returns info, a lock of one holder, with the lease left read now
// (ms; -1 none), its holder in holders (of length 1).
func (info Info) withTTL(ms int64, holders []Holder) Info {
	ttl := time.Duration(-1)
	if ms >= 0 {
		ttl = time.Duration(ms) * time.Millisecond
	}
	holders[0] = info.Holders[0]
	holders[0].TTL = ttl
	info.TTL, info.Holders = ttl, holders
	return info
}
