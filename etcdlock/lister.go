package etcdlock

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// A Lister is List for a caller that lists again and again, as a live view
// of the locks does (dlock top): its List returns what Client.List returns
// (the same locks and Infos, order, errors and bad input), including every
// change committed in etcd before it began, but reads the locks whole only
// once. Its first List reads every key under the Client's prefix in one
// range read and watches them from there on; every later List costs etcd
// one read of its revision plus one lease lookup per distinct lease of the
// matching locks (the locks of one Client share its session lease), up to
// 16 at once, whatever the number of locks and however few of them
// changed.
//
// When the Lister stops following the keys — etcd compacted the changes it
// had not seen yet, its watch ended or fell behind — the next List reads
// every key again. While etcd is unreachable List returns its error within
// ctx's deadline, never what it knew before; a List that fails leaves the
// Lister usable for the next. A List after Close, or once the Client is
// closed, returns dlock.ErrClosed.
//
// Keys under the prefix that belong to no lock of the Client's layout are
// left out of List and reported by Foreign. Unlike Client.List, which
// reads every key in a lock's directory as one of its holders or waiters,
// a key there whose holder part is of no layout is foreign. The keys of a
// Client whose prefix is nested under this one's (prefix "dlock/x/" under
// "dlock/") are foreign too.
//
// A Lister's List calls run one at a time; it is safe for concurrent use.
// It keeps the keys of the locks under the prefix (and the names of the
// foreign ones) in memory until Close.
type Lister struct {
	c  *Client
	id string // its watch's own stream (see streamCtx)

	mu      sync.Mutex
	m       *mirror  // the keys followed; nil: read them at the next List
	foreign []string // what the last List found of no lock, sorted
	closed  bool
	wg      sync.WaitGroup // the watch goroutines

	afterRead  func()        // tests: called after a whole read, before its watch starts
	reads      int           // tests: how many times List read every key
	watchDelay time.Duration // tests: how late each watch response is applied
}

// NewLister returns a Lister of the Client's locks.
func (c *Client) NewLister() *Lister {
	return &Lister{c: c, id: strconv.FormatUint(listerIDs.Add(1), 10)}
}

// listerIDs numbers the Listers of the process.
var listerIDs atomic.Uint64

const (
	// readPage is how many keys one range read of a whole read returns.
	readPage = 5000
	// catchUp bounds how long a List waits for the watch to deliver the
	// changes before its read of the revision; past it, it reads whole.
	catchUp = 5 * time.Second
	// progressEvery is how often a List that waits asks etcd again where
	// the watch stands.
	progressEvery = 200 * time.Millisecond
)

// List returns the held locks whose names match pattern, as Client.List
// does (the same order, errors and bad input), as they were at least when
// List began.
func (l *Lister) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var (
		keys    map[string]lockKeys
		foreign []string
		glob    string
	)
	infos, err := seam.Listing[dlock.Info]{
		Names: func(ctx context.Context, g string) ([]string, error) {
			if l.closed || l.c.isClosed() {
				return nil, dlock.ErrClosed
			}
			m, err := l.current(ctx)
			if err != nil {
				return nil, err
			}
			var names []string
			glob = g
			names, keys, foreign = m.snapshot(glob)
			return names, nil
		},
		InspectBatch: func(ctx context.Context, names []string) ([]dlock.Info, []error) {
			infos, errs := make([]dlock.Info, len(names)), make([]error, len(names))
			var leases leaseSet
			for _, name := range names {
				_, kvs := keys[name].shape()
				leases.add(kvs)
			}
			ttls, err := l.c.leaseTTLs(ctx, leases.ids, listWorkers)
			if err != nil {
				err = seam.StoreErr(ctx, "list", "", glob, err)
				for i := range errs {
					errs[i] = err
				}
				return infos, errs
			}
			for i, name := range names {
				infos[i] = l.c.lockInfo(name, keys[name], ttls)
			}
			return infos, errs
		},
		Batch: math.MaxInt, Workers: 1, // one batch: each lease is read once
		Held: func(i dlock.Info) bool { return i.Held }, Oldest: dlock.Info.Oldest, Name: func(i dlock.Info) string { return i.Name },
	}.List(ctx, pattern)
	if err != nil {
		return nil, err
	}
	l.foreign = foreign
	return infos, nil
}

// Foreign returns, sorted, the keys (without the Client's prefix) that the
// last List that succeeded found under the prefix and that belong to no
// lock of the Client's layout: keys outside the directories the Client
// writes ("junk"), keys in them that name no lock ("mutex/stock:x") or of
// no holder's layout ("mutex/7:stock:x/a/b"). A key whose lock name can be
// read is reported when that name matches the List's pattern; one with no
// name only when the pattern matches every name ("" or "*").
func (l *Lister) Foreign() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.foreign)
}

// Close ends the Lister's watch and forgets the keys; a List after Close
// returns dlock.ErrClosed. Close waits for a List in progress. Safe to
// call twice.
func (l *Lister) Close() error {
	l.mu.Lock()
	l.closed = true
	l.drop()
	l.foreign = nil
	l.mu.Unlock()
	l.wg.Wait()
	return nil
}

// current returns the mirror, brought up to date with every change
// committed before it was called, or read whole if there is none or it
// cannot be.
func (l *Lister) current(ctx context.Context) (*mirror, error) {
	if m := l.m; m != nil {
		ok, err := l.fresh(ctx, m)
		if err != nil {
			return nil, err
		}
		if ok {
			return m, nil
		}
		l.drop()
	}
	m, err := l.read(ctx)
	if err != nil {
		return nil, err
	}
	l.m = m
	return m, nil
}

// fresh brings m up to date with every change committed before it was
// called, by reading etcd's revision and waiting for the watch to deliver
// the changes up to it: true once it is, false when it cannot be (its
// watch ended, or did not catch up within catchUp). It returns the error
// of the read, or ctx's if ctx ended while it waited (m is dropped then:
// its watch may be stuck).
func (l *Lister) fresh(ctx context.Context, m *mirror) (bool, error) {
	rev, err, _ := m.state()
	if err != nil {
		return false, nil
	}
	resp, err := l.c.cli.Get(ctx, l.c.prefix, clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	if resp.Header.Revision <= rev {
		return true, nil
	}
	ok, err := l.await(ctx, m, resp.Header.Revision)
	if err != nil {
		l.drop()
	}
	return ok, err
}

// drop forgets the mirror and ends its watch.
func (l *Lister) drop() {
	if l.m != nil {
		l.m.cancel()
		l.m = nil
	}
}

// await waits until m has applied every change up to rev (true), its
// watch ended or it did not catch up within catchUp (false), or ctx ended
// (its error), asking etcd where the watch stands every progressEvery.
func (l *Lister) await(ctx context.Context, m *mirror, rev int64) (bool, error) {
	give := time.NewTimer(catchUp)
	defer give.Stop()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	sctx := l.streamCtx(ctx)
	for ask := true; ; {
		at, err, changed := m.state()
		switch {
		case err != nil:
			return false, nil
		case at >= rev:
			return true, nil
		}
		if ask {
			// Bounded: the request waits while the stream reconnects. A
			// ctx of its own: a request for a stream that is gone opens
			// one on it. An error shows as a watch that does not catch up.
			rctx, cancel := context.WithTimeout(sctx, progressEvery)
			_ = l.c.cli.RequestProgress(rctx)
			cancel()
			ask = false
		}
		select {
		case <-changed:
		case <-tick.C:
			ask = true
		case <-give.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// streamCtx returns ctx with the metadata of the Lister's watch stream: the
// etcd client runs the watches of equal metadata on one stream, and
// answers a progress request on every watch of the stream.
func (l *Lister) streamCtx(ctx context.Context) context.Context {
	return clientv3.WithRequireLeader(metadata.AppendToOutgoingContext(ctx, "dlock-lister", l.id))
}

// read reads every key under the prefix (a page at a time, at the
// revision of the first) and watches them from there.
func (l *Lister) read(ctx context.Context) (*mirror, error) {
	prefix := l.c.prefix
	m := &mirror{prefix: len(prefix), locks: make(map[string]*mirrored), foreign: make(map[string]string), changed: make(chan struct{})}
	from, end := prefix, clientv3.GetPrefixRangeEnd(prefix)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(readPage)}
		if m.rev != 0 {
			opts = append(opts, clientv3.WithRev(m.rev))
		}
		resp, err := l.c.cli.Get(ctx, from, opts...)
		if err != nil {
			return nil, err
		}
		if m.rev == 0 {
			m.rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			m.set(string(kv.Key[len(prefix):]), kv)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	l.reads++
	if l.afterRead != nil {
		l.afterRead()
	}
	wctx, cancel := context.WithCancel(l.c.bg) // Client.Close ends it too
	m.cancel = cancel
	wch := l.c.cli.Watch(l.streamCtx(wctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(m.rev+1))
	l.wg.Add(1)
	delay := l.watchDelay
	if !l.c.background(func(context.Context) { l.follow(m, wch, delay) }) {
		l.wg.Done()
		cancel()
		return nil, dlock.ErrClosed
	}
	return m, nil
}

// errWatchEnded is why a mirror whose watch channel closed is no longer
// kept.
var errWatchEnded = errors.New("etcdlock: the lister's watch ended")

// follow applies the watch's responses to m until the watch ends, each
// delay after it came (tests).
func (l *Lister) follow(m *mirror, wch clientv3.WatchChan, delay time.Duration) {
	defer l.wg.Done()
	defer m.cancel()
	for resp := range wch {
		if delay > 0 {
			time.Sleep(delay)
		}
		if err := resp.Err(); err != nil || resp.Canceled {
			m.end(cmp.Or(err, errWatchEnded)) // compacted, no leader, ...
			return
		}
		m.apply(resp)
	}
	m.end(errWatchEnded)
}

// A mirror is the keys under a Client's prefix as a whole read and the
// watch after it left them.
type mirror struct {
	prefix int                // the length of the prefix
	cancel context.CancelFunc // ends the watch

	mu      sync.Mutex
	rev     int64         // every change up to rev is applied
	err     error         // why the watch ended; nil while it runs
	changed chan struct{} // closed when rev or err changes
	locks   map[string]*mirrored
	foreign map[string]string // foreign keys (without the prefix): their lock's name, or ""
}

// A mirrored lock is the keys of one lock name.
type mirrored struct {
	dirs    []map[string]*mvccpb.KeyValue // by shape, as inspected; by key
	permits *mvccpb.KeyValue
	sorted  *lockKeys // the keys as Inspect reads them; nil: to sort again
}

// state returns how far m has applied changes, why its watch ended, and a
// channel closed when either changes.
func (m *mirror) state() (int64, error, <-chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rev, m.err, m.changed
}

// end records that m's watch ended with err.
func (m *mirror) end(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err == nil {
		m.err = err
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// apply applies a watch response: its events, or the revision up to which
// a progress notification says every change was delivered.
func (m *mirror) apply(resp clientv3.WatchResponse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	rev := m.rev
	if resp.IsProgressNotify() {
		rev = max(rev, resp.Header.Revision)
	}
	for _, ev := range resp.Events {
		kv := ev.Kv
		rel := string(kv.Key[m.prefix:])
		if ev.Type == mvccpb.DELETE {
			kv = nil
		}
		m.set(rel, kv)
		rev = max(rev, ev.Kv.ModRevision)
	}
	if rev != m.rev {
		m.rev = rev
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// set records the key rel (without the prefix) as kv, or gone if kv is
// nil.
func (m *mirror) set(rel string, kv *mvccpb.KeyValue) {
	kind, dir, name := classify(rel)
	switch kind {
	case keyMark:
		return
	case keyForeign:
		if kv == nil {
			delete(m.foreign, rel)
		} else {
			m.foreign[rel] = name
		}
		return
	}
	lk := m.locks[name]
	if lk == nil {
		if kv == nil {
			return
		}
		lk = &mirrored{dirs: make([]map[string]*mvccpb.KeyValue, len(inspected))}
		m.locks[name] = lk
	}
	lk.sorted = nil
	if kind == keyCount {
		lk.permits = kv
	} else if kv == nil {
		delete(lk.dirs[dir], rel)
	} else {
		if lk.dirs[dir] == nil {
			lk.dirs[dir] = make(map[string]*mvccpb.KeyValue)
		}
		lk.dirs[dir][rel] = kv
	}
	if lk.permits == nil && !slices.ContainsFunc(lk.dirs, func(d map[string]*mvccpb.KeyValue) bool { return len(d) > 0 }) {
		delete(m.locks, name)
	}
}

// snapshot returns the names matching glob of the locks of which m has a
// holder's or waiter's key, with their keys, and the foreign keys that
// glob selects (see Lister.Foreign), sorted.
func (m *mirror) snapshot(glob string) (names []string, keys map[string]lockKeys, foreign []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys = make(map[string]lockKeys)
	for name, lk := range m.locks {
		if !seam.MatchGlob(glob, name) {
			continue
		}
		k := lk.keys()
		if _, kvs := k.shape(); len(kvs) > 0 { // else not held
			names = append(names, name)
			keys[name] = k
		}
	}
	for rel, name := range m.foreign {
		if name == "" && glob == "*" || name != "" && seam.MatchGlob(glob, name) {
			foreign = append(foreign, rel)
		}
	}
	slices.Sort(foreign)
	return names, keys, foreign
}

// keys returns lk's keys as Inspect reads them (each directory's oldest
// first).
func (lk *mirrored) keys() lockKeys {
	if lk.sorted == nil {
		k := lockKeys{dirs: make([][]*mvccpb.KeyValue, len(lk.dirs)), permits: lk.permits}
		for i, d := range lk.dirs {
			k.dirs[i] = slices.SortedFunc(maps.Values(d), func(a, b *mvccpb.KeyValue) int {
				return cmp.Or(cmp.Compare(a.CreateRevision, b.CreateRevision), bytes.Compare(a.Key, b.Key))
			})
		}
		lk.sorted = &k
	}
	return *lk.sorted
}

// keyKind is what a key under a Client's prefix is to a Lister.
type keyKind int

const (
	keyForeign keyKind = iota // of no lock of the layout
	keyHolder                 // a holder's or waiter's key in a shape's directory
	keyCount                  // a Semaphore's count (permits/)
	keyMark                   // a lock-delay mark of a lock key (mark/)
)

// classify returns what the key rel (without the prefix) is (see keys.go
// and lockdelay.go), the index in inspected of a lock key's shape, and the
// name of its lock ("" when it names none).
func classify(rel string) (kind keyKind, dir int, name string) {
	for i, shape := range inspected {
		if !strings.HasPrefix(rel, shape+"/") {
			continue
		}
		name, ok := nameOf(rel, shape+"/")
		if !ok {
			return keyForeign, 0, ""
		}
		holder := rel[len(shape)+1+len(strconv.Itoa(len(name)))+1+len(name)+1:]
		if shape == "rw" {
			side, rest, found := strings.Cut(holder, "/")
			if !found || side != "r" && side != "w" && side != "d" {
				return keyForeign, 0, name
			}
			holder = rest
		}
		if holder == "" || strings.Contains(holder, "/") || seam.CheckName(name) != nil {
			return keyForeign, 0, name
		}
		return keyHolder, i, name
	}
	if rest, ok := strings.CutPrefix(rel, "permits/"); ok {
		size, name, found := strings.Cut(rest, ":")
		n, err := strconv.Atoi(size)
		switch {
		case !found || err != nil || n < 1 || strconv.Itoa(n) != size || len(name) != n:
			return keyForeign, 0, ""
		case seam.CheckName(name) != nil:
			return keyForeign, 0, name
		}
		return keyCount, 0, name
	}
	if rest, ok := strings.CutPrefix(rel, markDir); ok {
		kind, _, name := classify(rest)
		if kind == keyHolder {
			return keyMark, 0, name
		}
		return keyForeign, 0, name
	}
	return keyForeign, 0, ""
}
