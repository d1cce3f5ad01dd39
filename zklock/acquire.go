package zklock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// request is one Acquire call of some shape.
type request struct {
	shape     string   // for events, errors and Inspect: "mutex", "lock", "rw_read", "rw_write", "semaphore", "multi"
	family    string   // the directory family: familyLock or familySemaphore
	name      string   // the lock's name (a MultiLock's: its members joined by ",")
	names     []string // a MultiLock's members, in canonical order; nil for the other shapes
	kind      byte
	permits   int        // a semaphore's permits, as ZooKeeper keeps them (see settle)
	sem       *Semaphore // the Semaphore a permit is asked of
	reentrant bool       // re-entered by its owner (through the Keeper); its nodes record their owner
	owner     string
	carried   bool // the owner came with ctx (it may hold something already)
}

// The directory families: one directory per lock name and family.
const (
	familyLock      = "lock"      // Mutex, Lock, RWLock, MultiLock members
	familySemaphore = "semaphore" // Semaphore permits
)

// place is where a node stands in its directory's listing.
type place struct {
	found bool   // the node is listed
	ok    bool   // it holds the lock
	watch string // if not: the member to watch ("": the whole directory)
	twins []string
}

// admitted reads the listing of dir for me, r's node of attempt, by the
// rule of a grant (seam.Admission): whether it is there, whether it holds
// the lock, the member to watch if not (the nearest one in its way ahead
// of it; else a downgrade after it), and the twins before it (nodes of the
// same attempt: a create applied late), which block nobody once deleted.
// A reader's own is its owner's write hold through this client. One pass
// over the names, no sort: a hot lock's listing is long.
func (r *request) admitted(c *Client, dir, me, attempt string, children []string) place {
	mine, ok := parseMember(me)
	if !ok {
		return place{}
	}
	var p place
	ad := seam.Admit(modeOf(mine.kind), r.permits)
	var near, after member // in the way: the nearest ahead of it, one after it
	for _, ch := range children {
		if ch == me {
			p.found = true
			continue
		}
		m, ok := parseMember(ch)
		if !ok {
			continue
		}
		ahead := m.seq < mine.seq
		if ahead && len(ch) > 2 && strings.HasPrefix(ch[2:], attempt) {
			p.twins = append(p.twins, ch)
			continue
		}
		own := ahead && mine.kind == kindRead && m.kind == kindWrite && c.ownedBy(dir, ch, r.owner)
		switch {
		case !ad.See(seam.Other{Mode: modeOf(m.kind), Ahead: ahead, Own: own}):
		case !ahead:
			after = m
		case near.name == "" || m.seq > near.seq:
			near = m
		}
	}
	p.ok = ad.Granted()
	if !p.ok && r.kind != kindPermit { // a permit watches the whole directory
		p.watch = cmp.Or(near.name, after.name)
	}
	return p
}

// acquire runs one Acquire call: check the input, re-enter a hold of the
// same owner, else queue a node and wait for it to be granted.
func (c *Client) acquire(ctx context.Context, r *request, opts []dlock.Option) (l *dlock.Lease, err error) {
	call, err := c.keeper.Begin(ctx, seam.Request{Shape: r.shape, Name: r.name, Check: r.check, Limit: c.limit, Closed: c.closed}, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = call.End((*seam.Lease)(l), err) }()
	o := call.Options
	r.owner = seam.CarriedOwner(ctx)
	r.carried = r.owner != ""
	key := ""
	if r.reentrant {
		if !r.carried {
			r.owner = seam.OwnerOf(ctx) // a new owner: it holds nothing yet
		}
		id := r.name
		if r.names != nil { // a MultiLock: its members quoted, so that "a,b" and ("a", "b") differ
			q := make([]string, len(r.names))
			for i, n := range r.names {
				q[i] = strconv.Quote(n)
			}
			id = strings.Join(q, ",")
		}
		key = r.shape + "\x00" + id + "\x00" + r.owner
	}
	until := call.Until() // zero: until ctx is done
	if r.reentrant && r.carried {
		// One acquisition per owner and key at a time: a second one of the
		// same owner re-enters once the first is granted instead of
		// queueing behind it. (A new owner cannot have another acquisition
		// in progress.) The gate is waited for as long as Wait allows.
		l, done, err := c.keeper.Enter(ctx, key, r.owner, until, c.onLost(o.OnLost))
		if err != nil {
			return nil, err
		}
		if l != nil { // re-entered: its LeaseTime and MaxHold apply to the hold
			if err := c.keeper.Reentered(ctx, l, o); err != nil {
				return nil, err
			}
			if h := c.keeper.HoldOf(l); h != nil && o.Lease > 0 {
				h.Ops().lastAtLeast(o.Lease)
			}
			return (*dlock.Lease)(l), nil
		}
		defer done()
		if err := c.selfBlocked(r); err != nil {
			return nil, err
		}
	}
	// A try is bounded by the session timeout; Close ends the wait (each
	// request watches it: call).
	wctx, cancel := call.WaitContext(c.timeout, nil)
	defer cancel()
	sl, err := seam.Queue(wctx, &call, &line{c: c, r: r, ctx: ctx, key: key, o: o}, c.closed, "zookeeper")
	return (*dlock.Lease)(sl), err
}

// limit returns why the client refuses an acquisition's options, or nil.
func (c *Client) limit(o seam.Options) error {
	err := o.Portable()
	if err == nil {
		err = o.NoLockDelay("ZooKeeper")
	}
	if err == nil && o.QueueTimeout != 0 && o.QueueTimeout < c.timeout {
		err = fmt.Errorf("%w: queue timeout %v is shorter than the session timeout %v (a waiter's place lives as long as its session: shorten the session timeout instead)",
			dlock.ErrInvalidDuration, o.QueueTimeout, c.timeout)
	}
	return err
}

// check returns why r cannot be acquired, or nil.
func (r *request) check() error {
	if r.names == nil {
		if err := seam.CheckName(r.name); err != nil {
			return err
		}
		if r.kind == kindPermit && r.permits < 1 {
			return fmt.Errorf("%w: %d permits", dlock.ErrInvalidArgument, r.permits)
		}
		return nil
	}
	if len(r.names) == 0 {
		return fmt.Errorf("%w: a MultiLock needs at least one name", dlock.ErrInvalidArgument)
	}
	for i, n := range r.names {
		if err := seam.CheckName(n); err != nil {
			return err
		}
		if i > 0 && n == r.names[i-1] {
			return fmt.Errorf("%w: name %q appears twice in a MultiLock", dlock.ErrInvalidArgument, n)
		}
	}
	return nil
}

// nodeOwner is the owner r's nodes record: its owner if it is reentrant.
func (r *request) nodeOwner() string {
	if r.reentrant {
		return r.owner
	}
	return ""
}

// members returns the names r queues on: a MultiLock's members, or r's
// name.
func (r *request) members() []string {
	if r.names != nil {
		return r.names
	}
	return []string{r.name}
}

// selfBlocked returns an error if r's owner already holds a node, through
// this client, that r would wait behind for ever: a read hold before a
// write (dlock.ErrUpgrade), or an exclusive hold of another reentrant
// shape (a Lock and a MultiLock member, say) that r cannot re-enter. A
// reader may read under its own write hold (see admitted). A Mutex or a
// Semaphore has no owner: its holder waits like anyone.
func (c *Client) selfBlocked(r *request) error {
	if r.kind == kindRead {
		return nil
	}
	for _, name := range r.members() {
		switch c.ownKind(c.dir(r.family, name), r.owner) {
		case kindRead:
			return dlock.ErrUpgrade
		case kindWrite:
			return fmt.Errorf("%w: the owner holds %q already through another shape, which this one would wait for", dlock.ErrInvalidArgument, name)
		}
	}
	return nil
}

// line is one Acquire call's seam.Line: its nodes (a MultiLock's: one on
// each member) in their directories.
type line struct {
	c   *Client
	r   *request
	ctx context.Context // the caller's: a grant is handed over under it
	key string          // the Keeper key of a reentrant shape's hold
	o   seam.Options
}

// spot is a line's nodes, made by one transaction.
type spot struct {
	n     *node
	alone []bool    // per node: it was its directory's only child when made (created.alone)
	next  int       // the first node not yet known first in line
	sent  time.Time // when the request that last confirmed the nodes was sent (their session was alive then)
	dir   string    // where the last look found something in the way
	watch string    // the member to watch there ("": the whole directory)
	seen  []string  // the directory's children at that look
	again *time.Timer
}

var _ seam.Line[*spot] = (*line)(nil)

// Join queues a node for the request (a MultiLock: one on each member, in
// one transaction), or, for a reader whose owner holds the write side, a
// read node that holds at once (kindDown). ok is false when a permit's
// count changed meanwhile.
func (l *line) Join(ctx context.Context) (*spot, bool, error) {
	c, r := l.c, l.r
	names := r.members()
	dirs := make([]string, len(names))
	for i, name := range names {
		dirs[i] = c.dir(r.family, name)
	}
	attempt := newAttempt()
	kind, check := r.kind, c.countCheck(r)
	if w := c.under(r, dirs[0]); w != "" {
		kind, check = kindDown, w
	}
	got, sid, err := c.create(ctx, dirs, kind, attempt, c.nodeData(r, l.o), check)
	if errors.Is(err, errCheck) && kind == kindDown { // the write node went meanwhile: queue as a reader
		got, sid, err = c.create(ctx, dirs, r.kind, attempt, c.nodeData(r, l.o), "")
	}
	if errors.Is(err, errCheck) { // nothing was made: see what count ZooKeeper keeps
		return nil, false, c.settle(ctx, r)
	}
	if err != nil {
		return nil, false, err
	}
	n := &node{c: c, attempt: attempt, path: got.paths[0], more: got.paths[1:], kind: r.kind, owner: r.nodeOwner(), sid: sid, czxid: got.czxid}
	return &spot{n: n, alone: got.alone, sent: got.sent}, true, nil
}

// Look lists, directory by directory, where p's nodes stand: Granted once
// each is first in line (a node that was alone in its directory when made
// is, without a listing), Gone if one vanished (its session expired, or
// it was deleted).
func (l *line) Look(ctx context.Context, p *spot) (seam.Stand, error) {
	c, r := l.c, l.r
	for ; p.next <= len(p.n.more); p.next++ {
		if p.next < len(p.alone) && p.alone[p.next] {
			continue
		}
		path := p.n.path
		if p.next > 0 {
			path = p.n.more[p.next-1]
		}
		slash := strings.LastIndexByte(path, '/')
		dir, me := path[:slash], path[slash+1:]
		sent := time.Now()
		children, err := call(ctx, c, func() ([]string, error) {
			ch, _, err := c.conn.Children(dir)
			return ch, err
		})
		if err != nil {
			return seam.Behind, err
		}
		if c.conn.SessionID() != p.n.sid {
			return seam.Gone, nil
		}
		pl := r.admitted(c, dir, me, p.n.attempt, children)
		if !pl.found {
			return seam.Gone, nil
		}
		for _, tw := range pl.twins { // a twin of ours (a create applied late) blocks nobody
			go c.deletePath(dir+"/"+tw, p.n.sid)
		}
		if r.kind == kindPermit { // the count, read after the listing (see recheck)
			changed, err := c.recheck(ctx, r)
			if err != nil {
				return seam.Behind, err
			}
			if changed {
				p.next--
				continue
			}
		}
		if !pl.ok {
			p.dir, p.watch, p.seen = dir, pl.watch, children
			return seam.Behind, nil
		}
		p.sent = sent
	}
	return seam.Granted, nil
}

// Wait watches only what the last look found in p's way, and returns when
// it changes, or after the session timeout without a change (a watch is
// re-set after a reconnection, but the line must never hang on one).
func (l *line) Wait(ctx context.Context, p *spot) (bool, error) {
	c := l.c
	ev, err := c.watch(ctx, p.dir, p.watch, p.seen)
	if err != nil || ev == nil {
		// already gone, or the directory changed, or the connection is
		// down: look again (a look that fails pauses)
		if err != nil && !retryable(err) {
			return false, err
		}
		return false, nil
	}
	if p.again == nil {
		p.again = time.NewTimer(c.timeout)
	} else {
		p.again.Reset(c.timeout)
	}
	select {
	case <-ev:
	case <-p.again.C:
	case <-ctx.Done():
		return false, ctx.Err()
	case <-c.done:
		return false, errClosed
	}
	return false, nil
}

// Grant hands p's nodes to the Keeper (grant).
func (l *line) Grant(ctx context.Context, p *spot) (*seam.Lease, error) {
	l.stop(p)
	dl, err := l.c.grant(l.ctx, l.r, l.key, p.n, p.sent, l.o)
	return (*seam.Lease)(dl), err
}

// Leave deletes p's nodes (giveUp).
func (l *line) Leave(p *spot) {
	l.stop(p)
	l.c.giveUp(p.n)
}

func (l *line) stop(p *spot) {
	if p.again != nil {
		p.again.Stop()
	}
}

// Transient reports a lost connection: the request is tried again.
func (l *line) Transient(err error) bool { return retryable(err) }

// watch sets a watch on dir/name (the whole directory when name is "") and
// returns its channel, or nil if the node is already gone, or the
// directory's children are no longer listed (a change made between the
// listing and the watch fires no event: look again).
func (c *Client) watch(ctx context.Context, dir, name string, listed []string) (<-chan zk.Event, error) {
	return call(ctx, c, func() (<-chan zk.Event, error) {
		if name == "" {
			children, _, ev, err := c.conn.ChildrenW(dir)
			if err == nil && !sameSet(children, listed) {
				return nil, nil
			}
			return ev, err
		}
		// GetW, not ExistsW: on a node that is already gone it sets no
		// watch (ExistsW would leave a creation watch that never fires).
		_, _, ev, err := c.conn.GetW(dir + "/" + name)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return ev, err
	})
}

// sameSet reports whether a and b hold the same names.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// giveUp deletes the nodes of an acquisition that will not be granted.
func (c *Client) giveUp(n *node) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	for _, p := range n.paths() {
		if err := n.deleteOne(ctx, p); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrSessionExpired) && ctx.Err() == nil {
			go c.deletePath(p, n.sid) // keep trying while the session lasts
		}
	}
}

// grant hands n to the Keeper and has n guarded (watchLater). A fixed lease
// no longer than firstSpan is the grant's TTL; a longer one (or none) is
// kept by the heartbeat, from a first deadline firstSpan after sent (the
// session surely lives that long at the quorum), and a fixed one ended by
// a timer. The grant is a candidate of the session's liveness, and wakes
// the heartbeat.
func (c *Client) grant(ctx context.Context, r *request, key string, n *node, sent time.Time, o seam.Options) (*dlock.Lease, error) {
	first := firstSpan(c.timeout)
	g := seam.Grant[*node]{
		Shape: r.shape, Name: r.name, Key: key, Owner: r.owner, ID: n.path[strings.LastIndexByte(n.path, '/')+1:],
		Token: n.czxid, Sent: sent, TTL: first, Renewed: true, Session: n.sid, MaxHold: o.MaxHold, Ops: n, OnLost: c.onLost(o.OnLost),
	}
	long := o.Lease > first
	if o.Lease > 0 && !long {
		g.TTL, g.Renewed, g.Session = o.Lease, false, nil
	}
	n.first = seam.LeaseEnd(sent, g.TTL)
	c.remember(n)
	c.quorum.answered(n.sid, sent, c.timeout/50)
	l, err := c.keeper.Lease(ctx, g)
	if err != nil {
		return nil, err
	}
	if g.Renewed {
		c.woken()
	}
	n.mu.Lock()
	n.hold = c.keeper.HoldOf(l)
	if long && !n.gone {
		end := seam.LeaseEnd(sent, o.Lease)
		n.endsAt, n.leaseEnd = end, time.AfterFunc(time.Until(end), func() { c.expire(n) })
	}
	n.mu.Unlock()
	c.watchLater(n)
	return (*dlock.Lease)(l), nil
}

// onLost returns the OnLost of a grant: the lost hold's nodes are deleted
// (so they block nobody), then user runs.
func (c *Client) onLost(user func(*seam.Lease)) func(*seam.Lease) {
	if user == nil {
		return c.lostFn
	}
	return c.lostHook(user)
}

func (c *Client) lostHook(user func(*seam.Lease)) func(*seam.Lease) {
	return func(l *seam.Lease) {
		if h := c.keeper.HoldOf(l); h != nil {
			c.lost(h.Ops())
		}
		if user != nil {
			user(l)
		}
	}
}
