package zklock

import (
	"context"
	"errors"
	"net/url"

	"github.com/go-zookeeper/zk"

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
// List finds the names among the children of the family directories
// <root>/lock (Mutex, Lock, RWLock and MultiLock: each member of a
// MultiLock is listed, of Shape "multi" as Inspect reports it) and
// <root>/semaphore, one listing each:
// a child is a lock's directory, its name the child unescaped (a child that
// is not a name as this package escapes it is left out). It reads each lock
// whose name matches as Inspect does, up to 16 at once, and lists a name
// once whatever its families. Locks that are not held are left out (a
// directory left empty, only waited for, a free Semaphore whose count is
// kept, freed while List runs); a lock acquired after the listings is
// missed. A lock's directory stays after its last release: List reads
// every matching name ever used under the root, held or not (a Lister,
// for a caller that lists again and again, reads only what changed). A
// pattern longer than seam.MaxNameLen returns
// dlock.ErrInvalidArgument. On a ZooKeeper error List returns it and no
// Info; on a closed Client, dlock.ErrClosed.
func (c *Client) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	return seam.Listing[dlock.Info]{
		Names: c.lockNames, Inspect: c.Inspect, Workers: listWorkers,
		Held: func(i dlock.Info) bool { return i.Held }, Oldest: dlock.Info.Oldest, Name: func(i dlock.Info) string { return i.Name },
	}.List(ctx, pattern)
}

// lockNames returns the lock names matching glob that have a
// directory in a family, each once.
func (c *Client) lockNames(ctx context.Context, glob string) ([]string, error) {
	if c.closed() {
		return nil, dlock.ErrClosed
	}
	seen := make(map[string]bool)
	var names []string
	for _, family := range []string{familyLock, familySemaphore} {
		children, err := call(ctx, c, func() ([]string, error) {
			ch, _, err := c.conn.Children(c.root + "/" + family)
			return ch, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if errors.Is(err, errClosed) {
			return nil, dlock.ErrClosed
		}
		if err != nil {
			return nil, err
		}
		for _, child := range children {
			name, ok := unescape(child)
			if ok && !seen[name] && seam.MatchGlob(glob, name) {
				seen[name] = true
				names = append(names, name)
			}
		}
	}
	return names, nil
}

// unescape returns the lock name whose directory is called child; ok is
// false unless child is a name as escape writes it.
func unescape(child string) (name string, ok bool) {
	name, err := url.PathUnescape(child)
	return name, err == nil && escape(name) == child
}
