package etcdlock

import (
	"context"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// listWorkers bounds the Inspect calls List runs at once.
const listWorkers = 16

// List returns the held locks whose names match pattern, oldest first (by
// dlock.Info.Oldest; unknown ages last, ties by name), so a stuck holder
// stands out. The pattern is a Redis glob over lock
// names ("stock:*", "order:1?", "*"; "" means "*"); use '\' to match '*',
// '?', '[' or '\' literally.
//
// List finds the names with one keys-only read (no values) of each shape's
// directory under the prefix, <prefix>mutex/, lock/, rw/ and semaphore/, in
// one transaction: a lock is found by any key of a holder or a waiter (a
// MultiLock's members are Locks, as Inspect reports them). It reads each
// lock whose name matches as Inspect does, up to 16 at once, and lists a
// name once whatever the number of its shapes. Locks that are not held are
// left out (only waited for, a free Semaphore whose count is kept, freed
// while List runs), as are keys that name no valid lock; a lock acquired
// after the names were read is missed. A pattern longer than
// seam.MaxNameLen returns dlock.ErrInvalidArgument. On an etcd error List
// returns it and no Info.
func (c *Client) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	return seam.Listing[dlock.Info]{
		Names: c.lockNames, Inspect: c.Inspect, Workers: listWorkers,
		Held: func(i dlock.Info) bool { return i.Held }, Oldest: dlock.Info.Oldest, Name: func(i dlock.Info) string { return i.Name },
	}.List(ctx, pattern)
}

// lockNames returns the lock names matching glob that have a key in
// the directory of a shape Inspect looks for, each once.
func (c *Client) lockNames(ctx context.Context, glob string) ([]string, error) {
	ops := make([]clientv3.Op, len(inspected))
	for i, kind := range inspected {
		ops[i] = clientv3.OpGet(c.prefix+kind+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	}
	resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool)
	var names []string
	for i, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().GetKvs() {
			name, ok := nameOf(string(kv.Key), c.prefix+inspected[i]+"/")
			if ok && !seen[name] && seam.MatchGlob(glob, name) {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	return names, nil
}

// nameOf returns the name of the lock whose directory in base holds key
// (<base><len(name)>:<name>/..., see dir); ok is false for a key of
// another layout.
func nameOf(key, base string) (name string, ok bool) {
	rest, ok := strings.CutPrefix(key, base)
	size, rest, found := strings.Cut(rest, ":")
	n, err := strconv.Atoi(size)
	if !ok || !found || err != nil || n < 1 || strconv.Itoa(n) != size || len(rest) <= n || rest[n] != '/' {
		return "", false
	}
	return rest[:n], true
}
