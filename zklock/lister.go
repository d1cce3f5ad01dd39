package zklock

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-zookeeper/zk"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// A Lister is List for a caller that lists again and again, as a live view
// of the locks does (dlock top): its List returns what Client.List returns
// (the same locks, order, errors and bad input), but reads again only what
// ZooKeeper's watches said changed since its last List: a lock none of
// whose directories changed, nor its entries in the family directories, is
// not read again, and its Info is the one read before (nothing in an Info
// on ZooKeeper depends on when it is read: TTL is how long a hold outlives
// its holder's last sign of life, not a countdown). So a List of locks that
// did not change costs ZooKeeper one request (a sync) whatever their
// number, where Client.List lists every lock directory ever used under the
// root and reads every node in it; in exchange the server keeps a watch of
// the Lister's session on each directory it read until that changes. A
// node's data is written once, when it is queued: data set on a node from
// outside (zkCli set) shows once its directory changes.
//
// Every List asks ZooKeeper before it answers, so it fails while ZooKeeper
// cannot be reached (it never returns what it knew as if it were fresh),
// and it shows every change ZooKeeper committed before it began; a change
// committed while it runs may show in the next List only. After a
// reconnection the next List reads every lock again; after the session
// ended (expired), everything. A List that fails leaves the Lister usable:
// the next reads again whatever the failed one did not finish.
//
// A Lister's List calls run one at a time; it is safe for concurrent use.
type Lister struct {
	c      *Client
	closed atomic.Bool

	mu      sync.Mutex      // one List at a time; guards the fields below
	sid     int64           // the session the Lister read in (0: none yet)
	back    <-chan struct{} // closed at the next reconnection after the last List began
	tops    [4]top          // the root, the families and the count directory
	foreign []string        // what the last List found that is no lock

	// smu guards what List's readers (up to listWorkers at once) share.
	smu     sync.Mutex
	gen     int64            // counts the resets: a watch set before one is not kept
	watches map[string]watch // the watches pending, by childKey or existKey
	locks   map[string]*seen // the locks read, by name
	strays  []string         // the strays of the locks of this List
}

// The Lister's top-level listings: indexes in Lister.tops.
const (
	topRoot = iota
	topLock
	topSemaphore
	topPermits
)

// top is a top-level listing: the root, a family directory or the
// directory of Semaphore counts.
type top struct {
	path    string
	read    bool            // children is still true: its watch is pending, or it is missing and its parent's is
	missing bool            // the node does not exist
	names   map[string]bool // the lock names of its children (a family, the counts)
	foreign []foreignEntry  // its children that are no lock's
}

// foreignEntry is a node under the root that is no lock: its path under
// the root, and the lock name it is of, if one can be read.
type foreignEntry struct {
	path, name string
	named      bool
}

// watch is a watch pending: its channel, and the lock whose directory it
// watches ("": a top-level listing).
type watch struct {
	ev   <-chan zk.Event
	lock string
}

// seen is a lock as the Lister read it.
type seen struct {
	info   dlock.Info
	strays []string
	fresh  bool  // unchanged since it was read: its directories' watches are pending
	in     uint8 // the top-level listings it was in when read (presence)
}

// NewLister returns a Lister of the Client's locks.
func (c *Client) NewLister() *Lister {
	l := &Lister{c: c}
	root := c.root
	if root == "" {
		root = "/"
	}
	l.tops = [4]top{
		{path: root},
		{path: c.root + "/" + familyLock},
		{path: c.root + "/" + familySemaphore},
		{path: c.root + "/permits"},
	}
	l.reset(0)
	return l
}

// List returns the held locks whose names match pattern, as Client.List
// does: oldest first, the same errors (a pattern longer than
// seam.MaxNameLen: dlock.ErrInvalidArgument; a closed Client or Lister:
// dlock.ErrClosed; a ZooKeeper error: that error, and no Info). See Lister
// for what it reads again and what it guarantees.
func (l *Lister) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var foreign []string
	infos, err := seam.Listing[dlock.Info]{
		Names: func(ctx context.Context, glob string) ([]string, error) {
			names, f, err := l.names(ctx, glob)
			foreign = f
			return names, err
		},
		Inspect: l.inspect, Workers: listWorkers,
		Held: func(i dlock.Info) bool { return i.Held }, Oldest: dlock.Info.Oldest, Name: func(i dlock.Info) string { return i.Name },
	}.List(ctx, pattern)
	l.smu.Lock()
	foreign = append(foreign, l.strays...)
	l.strays = nil
	l.smu.Unlock()
	if err != nil {
		return nil, err
	}
	slices.Sort(foreign)
	l.foreign = slices.Compact(foreign)
	return infos, nil
}

// Foreign returns, sorted, what the last List found under the Client's
// root that is no lock, as paths under the root: a child of the root that
// is no directory of this package ("junk"), a child of a family directory
// or of the Semaphore counts that is no lock name as this package writes
// it ("lock/%zz"), a child of a lock's directory that is no node of a lock
// ("lock/stock%3A1/junk", in the directories its List read). One of a
// lock name is reported when the name matches the List's pattern, one of
// no name when the pattern matches every name ("" or "*"). List leaves
// them out.
func (l *Lister) Foreign() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.foreign)
}

// Close ends the Lister: a List after Close returns dlock.ErrClosed (a
// List running returns what it read). The watches it left are left to
// fire, unheeded (or to end with the session). Close is idempotent.
func (l *Lister) Close() error {
	l.closed.Store(true)
	if l.mu.TryLock() { // drop what it knew, unless a List runs
		l.reset(0)
		l.mu.Unlock()
	}
	return nil
}

// reset forgets everything read and every watch (a new session's, sid):
// the next List reads everything again and watches anew.
func (l *Lister) reset(sid int64) {
	l.smu.Lock()
	defer l.smu.Unlock()
	l.sid = sid
	l.gen++
	l.watches = make(map[string]watch)
	l.locks = make(map[string]*seen)
	for i := range l.tops {
		l.tops[i].read = false
	}
}

// names begins a List: it asks ZooKeeper (a sync), learns from the
// watches that fired what changed, reads the top-level listings that did
// and returns the lock names matching glob, each once, and the foreign
// entries of the top-level listings that match it.
func (l *Lister) names(ctx context.Context, glob string) ([]string, []string, error) {
	c := l.c
	if l.closed.Load() || c.closed() {
		return nil, nil, dlock.ErrClosed
	}
	if sid := c.conn.SessionID(); sid != 0 && sid != l.sid { // 0: expired, no new one yet
		l.reset(sid)
	}
	if l.back != nil {
		select {
		case <-l.back: // reconnected since: read every lock again
			l.stale()
		default:
		}
	}
	l.back = c.reconn.next()
	// Every change committed before the sync was sent is applied at the
	// server when it answers, and the events of the watches it fired
	// reached the connection before that answer.
	if _, err := call(ctx, c, func() (string, error) { return c.conn.Sync("/") }); err != nil {
		return nil, nil, closedErr(err)
	}
	if l.fired() {
		l.reset(c.conn.SessionID())
	}
	changed := false
	for i := range l.tops {
		read, err := l.readTop(ctx, i)
		if err != nil {
			return nil, nil, closedErr(err)
		}
		changed = changed || read
	}
	if changed {
		l.presence()
	}
	all := glob == "*"
	var foreign []string
	for _, t := range l.tops {
		for _, f := range t.foreign {
			if f.named && seam.MatchGlob(glob, f.name) || !f.named && all {
				foreign = append(foreign, f.path)
			}
		}
	}
	var names []string
	for name := range l.tops[topLock].names {
		if seam.MatchGlob(glob, name) {
			names = append(names, name)
		}
	}
	for name := range l.tops[topSemaphore].names {
		if !l.tops[topLock].names[name] && seam.MatchGlob(glob, name) {
			names = append(names, name)
		}
	}
	return names, foreign, nil
}

// closedErr is err, or dlock.ErrClosed for errClosed.
func closedErr(err error) error {
	if errors.Is(err, errClosed) {
		return dlock.ErrClosed
	}
	return err
}

// stale marks every lock and listing for reading again (a reconnection:
// the watches stay, go-zookeeper sets them again on the new connection).
func (l *Lister) stale() {
	l.smu.Lock()
	defer l.smu.Unlock()
	for _, s := range l.locks {
		s.fresh = false
	}
	for i := range l.tops {
		l.tops[i].read = false
	}
}

// fired takes the events of the watches that fired: what they watched is
// to be read again. It reports whether one said the watches are gone
// (the session ended, the connection closed).
func (l *Lister) fired() (gone bool) {
	l.smu.Lock()
	defer l.smu.Unlock()
	for key, w := range l.watches {
		select {
		case ev := <-w.ev:
			delete(l.watches, key)
			if ev.Type == zk.EventNotWatching {
				gone = true
			}
			if w.lock != "" {
				if s := l.locks[w.lock]; s != nil {
					s.fresh = false
				}
				continue
			}
			for i := range l.tops {
				if l.tops[i].path == key[2:] {
					l.tops[i].read = false
				}
			}
		default:
		}
	}
	return gone
}

// readTop reads the i-th top-level listing again unless it is still true;
// read reports whether it did.
func (l *Lister) readTop(ctx context.Context, i int) (read bool, err error) {
	t := &l.tops[i]
	if i != topRoot {
		// A child of the root missing from its listing is missing: the
		// root's watch tells when it is made.
		root := &l.tops[topRoot]
		name := t.path[len(l.c.root)+1:]
		l.smu.Lock()
		_, pending := l.watches[childKey(t.path)]
		l.smu.Unlock()
		if root.missing || !root.names[name] {
			if t.read && t.missing {
				return false, nil
			}
			*t = top{path: t.path, read: true, missing: true}
			return true, nil
		}
		if t.read && pending {
			return false, nil
		}
	} else if t.read {
		return false, nil
	}
	children, _, err := l.list("")(ctx, t.path)
	missing := errors.Is(err, zk.ErrNoNode)
	if err != nil && !missing {
		return false, err
	}
	*t = top{path: t.path, read: true, missing: missing, names: make(map[string]bool)}
	if missing && i == topRoot {
		// Watch for its creation. If it was made since, read it next time
		// (it was made after this List began).
		exists, err := l.watchExists(ctx, t.path)
		if err != nil {
			return false, err
		}
		t.read = !exists
	}
	for _, ch := range children {
		if i == topRoot {
			switch {
			case ch == familyLock, ch == familySemaphore, ch == "permits":
				t.names[ch] = true
			case l.c.root == "" && ch == "zookeeper": // ZooKeeper's own
			default:
				t.foreign = append(t.foreign, foreignEntry{path: ch})
			}
			continue
		}
		path := t.path[len(l.c.root)+1:] + "/" + ch
		name, ok := unescape(ch)
		switch {
		case !ok:
			t.foreign = append(t.foreign, foreignEntry{path: path})
		case seam.CheckName(name) != nil:
			t.foreign = append(t.foreign, foreignEntry{path: path, name: name, named: true})
		default:
			t.names[name] = true
		}
	}
	return true, nil
}

// presence compares each lock's entries in the top-level listings with
// those it had when it was read: a lock whose entries changed is read
// again, one gone from both families is forgotten.
func (l *Lister) presence() {
	l.smu.Lock()
	defer l.smu.Unlock()
	for name, s := range l.locks {
		in := l.in(name)
		switch {
		case in&(1<<topLock|1<<topSemaphore) == 0:
			delete(l.locks, name)
		case in != s.in:
			s.fresh, s.in = false, in
		}
	}
}

// in returns the top-level listings that have an entry for name, as bits.
func (l *Lister) in(name string) uint8 {
	var in uint8
	for i := topLock; i <= topPermits; i++ {
		if l.tops[i].names[name] {
			in |= 1 << i
		}
	}
	return in
}

// inspect is Client.Inspect for the Lister's List: the Info read before
// if the lock did not change since, else the lock read again with watches.
func (l *Lister) inspect(ctx context.Context, name string) (dlock.Info, error) {
	l.smu.Lock()
	s := l.locks[name]
	if s != nil && s.fresh {
		info := s.info
		l.strays = append(l.strays, s.strays...)
		l.smu.Unlock()
		return own(info), nil
	}
	gen := l.gen
	in := l.in(name) // l.tops do not change while List reads locks
	l.smu.Unlock()
	info, strays, err := l.c.inspect(ctx, name, l.list(name))
	if err != nil {
		return info, err
	}
	l.smu.Lock()
	if gen == l.gen {
		l.locks[name] = &seen{info: info, strays: strays, fresh: true, in: in}
	}
	l.strays = append(l.strays, strays...)
	l.smu.Unlock()
	return own(info), nil
}

// own returns info with slices of its own (the Lister keeps the first).
func own(info dlock.Info) dlock.Info {
	info.Holders = slices.Clone(info.Holders)
	info.Queue = slices.Clone(info.Queue)
	return info
}

// childKey and existKey are the keys of a path's watches in
// Lister.watches.
func childKey(path string) string { return "c:" + path }
func existKey(path string) string { return "e:" + path }

// list returns the listDir of the lock called lock ("": a top-level
// listing): it lists with a child watch unless one is pending on the path
// already. A watch set by a request whose answer came after its caller
// gave up is kept too.
func (l *Lister) list(lock string) listDir {
	return func(ctx context.Context, path string) ([]string, *zk.Stat, error) {
		key := childKey(path)
		l.smu.Lock()
		_, pending := l.watches[key]
		gen := l.gen
		l.smu.Unlock()
		type dirList struct {
			names []string
			st    *zk.Stat
		}
		d, err := call(ctx, l.c, func() (dirList, error) {
			if pending {
				ch, st, err := l.c.conn.Children(path)
				return dirList{ch, st}, err
			}
			ch, st, ev, err := l.c.conn.ChildrenW(path)
			if err == nil {
				l.keep(gen, key, watch{ev: ev, lock: lock})
			}
			return dirList{ch, st}, err
		})
		return d.names, d.st, err
	}
}

// watchExists sets a watch on path's creation (or, if it exists, on its
// deletion and data) unless one is pending, and reports whether it exists.
func (l *Lister) watchExists(ctx context.Context, path string) (bool, error) {
	key := existKey(path)
	l.smu.Lock()
	_, pending := l.watches[key]
	gen := l.gen
	l.smu.Unlock()
	return call(ctx, l.c, func() (bool, error) {
		if pending {
			ok, _, err := l.c.conn.Exists(path)
			return ok, err
		}
		ok, _, ev, err := l.c.conn.ExistsW(path)
		if err == nil {
			l.keep(gen, key, watch{ev: ev})
		}
		return ok, err
	})
}

// keep records a watch set, unless the Lister was reset since its request
// was sent, or a watch of the path is pending (set by a request whose
// answer nobody waited for).
func (l *Lister) keep(gen int64, key string, w watch) {
	l.smu.Lock()
	defer l.smu.Unlock()
	if _, dup := l.watches[key]; gen == l.gen && !dup {
		l.watches[key] = w
	}
}
