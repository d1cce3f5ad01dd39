package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/go-zookeeper/zk"
)

// request is one Acquire call of some shape.
type request struct {
	shape   string // for events and errors: "mutex", "lock", "read", "write", "semaphore"
	family  string // the directory family: "lock" or "semaphore"
	name    string
	kind    byte
	permits int    // a semaphore's permits
	key     string // reentrant join key; "" for none
	owner   string
}

// admitted decides from the queue whether me holds the lock; if not, it
// returns the member to watch ("" : watch the whole directory).
func (r *request) admitted(c *Client, q []member, me int) (bool, string) {
	switch r.kind {
	case kindRead: // no writer before it (but the owner's own write hold)
		for i := me - 1; i >= 0; i-- {
			if q[i].kind == kindWrite && !c.ownedBy(r.dirPath(c)+"/"+q[i].name, r.owner) {
				return false, q[i].name
			}
		}
		return true, ""
	case kindPermit: // fewer than permits before it
		if me < r.permits {
			return true, ""
		}
		return false, ""
	default: // first in line
		if me == 0 {
			return true, ""
		}
		return false, q[me-1].name
	}
}

func (r *request) dirPath(c *Client) string { return c.dir(r.family, r.name) }

// acquire runs one Acquire call: check the input, join a reentrant hold
// of the same owner, else queue a node and wait for it to be granted.
func (c *Client) acquire(ctx context.Context, r *request, opts []dlock.Option) (l *dlock.Lease, err error) {
	start := time.Now()
	defer func() { c.keeper.Acquired(r.shape, r.name, start, err) }()
	if ctx == nil {
		return nil, opErr("acquire", r.name, fmt.Errorf("%w: nil context", dlock.ErrInvalidArgument))
	}
	if err := dlock.CheckName(r.name); err != nil {
		return nil, opErr("acquire", r.name, err)
	}
	o, err := dlock.ParseOptions(opts)
	if err != nil {
		return nil, opErr("acquire", r.name, err)
	}
	if r.kind == kindPermit && r.permits < 1 {
		return nil, opErr("acquire", r.name, fmt.Errorf("%w: %d permits", dlock.ErrInvalidArgument, r.permits))
	}
	if c.closed() {
		return nil, opErr("acquire", r.name, dlock.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, opErr("acquire", r.name, err)
	}
	r.owner = dlock.OwnerOf(ctx)
	if r.shape == "lock" {
		r.key = r.name + "\x00" + r.owner
		// One acquisition per owner and name at a time: a second one of
		// the same owner re-enters once the first is granted instead of
		// queueing behind it.
		leave, err := c.enter(ctx, r.key)
		if err != nil {
			return nil, opErr("acquire", r.name, err)
		}
		defer leave()
		if n := c.rejoin(r.key); n != nil {
			return c.grant(ctx, r, n, time.Time{}, o) // the hold's own deadline stands
		}
	}
	if r.kind == kindWrite && r.family == "lock" && c.holdsRead(r.dirPath(c), r.owner) {
		return nil, opErr("acquire", r.name, dlock.ErrUpgrade)
	}
	var until time.Time // the end of the wait; zero: until ctx is done
	if o.Wait >= 0 {
		until = start.Add(o.Wait)
	}
	n, sent, err := c.wait(ctx, r, until)
	if err != nil {
		switch {
		case errors.Is(err, errClosed):
			err = dlock.ErrClosed
		case errors.Is(err, errWaitOver):
			err = dlock.ErrNotAcquired
		}
		return nil, opErr("acquire", r.name, err)
	}
	return c.grant(ctx, r, n, sent, o)
}

var errWaitOver = errors.New("zklock: wait over")

// wait queues a node for r and returns it once granted, with the send time
// of the request that confirmed it (its session was alive then). On any
// error its node is deleted.
func (c *Client) wait(ctx context.Context, r *request, until time.Time) (*node, time.Time, error) {
	dir := r.dirPath(c)
	for {
		attempt := newAttempt()
		got, sid, err := c.create(ctx, dir, r.kind, attempt, r.owner)
		if err != nil {
			return nil, time.Time{}, err
		}
		n := &node{c: c, name: r.name, attempt: attempt, path: got.path, kind: r.kind, owner: r.owner, sid: sid, czxid: got.czxid, count: 1}
		sent, err := c.await(ctx, r, n, until)
		if err == nil {
			return n, sent, nil
		}
		if !errors.Is(err, errNodeGone) {
			c.giveUp(n)
			return nil, time.Time{}, err
		}
		// The node vanished (the session expired, or it was deleted): queue again.
	}
}

var errNodeGone = errors.New("zklock: our node is gone")

// await waits until n is granted, watching only what it waits for.
func (c *Client) await(ctx context.Context, r *request, n *node, until time.Time) (time.Time, error) {
	dir := r.dirPath(c)
	me := n.path[len(dir)+1:]
	backoff := 20 * time.Millisecond
	var over <-chan time.Time // the end of the wait
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		over = t.C
	}
	for {
		sent := time.Now()
		children, err := call(ctx, c, func() ([]string, error) {
			ch, _, err := c.conn.Children(dir)
			return ch, err
		})
		if retryable(err) {
			if err := sleep(ctx, c, backoff); err != nil {
				return time.Time{}, err
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		if err != nil {
			return time.Time{}, err
		}
		if c.conn.SessionID() != n.sid {
			return time.Time{}, errNodeGone
		}
		q := queue(children)
		pos := -1
		for i, m := range q {
			if m.name == me {
				pos = i
				break
			}
		}
		if pos < 0 {
			return time.Time{}, errNodeGone
		}
		for _, m := range q[:pos] { // a twin of ours (a create applied late) blocks nobody
			if m.name != me && strings.Contains(m.name, "-"+n.attempt+"-") {
				go c.deletePath(dir+"/"+m.name, n.sid)
			}
		}
		ok, watch := r.admitted(c, q, pos)
		if ok {
			return sent, nil
		}
		if err := ctx.Err(); err != nil {
			return time.Time{}, err
		}
		if !until.IsZero() && !time.Now().Before(until) {
			return time.Time{}, errWaitOver
		}
		ev, err := c.watch(ctx, dir, watch, children)
		if retryable(err) {
			continue
		}
		if err != nil {
			return time.Time{}, err
		}
		if ev == nil {
			continue // already gone, or the directory changed: look again
		}
		recheck := time.NewTimer(c.timeout)
		select {
		case <-ev:
		case <-recheck.C:
			// Look again even without an event: a watch is re-set after a
			// reconnection, but the queue must never hang on one.
		case <-over:
			return time.Time{}, errWaitOver
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-c.done:
			return time.Time{}, errClosed
		}
		recheck.Stop()
	}
}

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

// giveUp deletes the node of an acquisition that will not be granted.
func (c *Client) giveUp(n *node) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
	defer cancel()
	if err := n.delete(ctx); err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrSessionExpired) && ctx.Err() == nil {
		go c.deletePath(n.path, n.sid) // keep trying while the session lasts
	}
}

// grant hands n to the Keeper and starts n's guard. A fixed lease no
// longer than the session timeout is the grant's TTL; a longer one (or
// none) is kept by the heartbeat, and a fixed one ended by a timer.
func (c *Client) grant(ctx context.Context, r *request, n *node, sent time.Time, o dlock.Options) (*dlock.Lease, error) {
	g := dlock.Grant{
		Shape: r.shape, Name: r.name, Key: r.key, Owner: r.owner, ID: n.path[len(r.dirPath(c))+1:],
		Token: n.czxid, Sent: sent, TTL: c.timeout, Renewed: true, Ops: n,
	}
	user := o.OnLost
	g.OnLost = func(l *dlock.Lease) {
		c.lost(n)
		if user != nil {
			user(l)
		}
	}
	joined := n.count > 1
	if o.Lease > 0 && !joined {
		if o.Lease <= c.timeout {
			g.TTL, g.Renewed = o.Lease, false
			n.mu.Lock()
			n.fixed = true
			n.mu.Unlock()
		} else {
			end := sent.Add(o.Lease - dlock.Drift(o.Lease))
			n.mu.Lock()
			n.leaseEnd = time.AfterFunc(time.Until(end), func() { c.expire(n) })
			n.mu.Unlock()
		}
	}
	c.remember(n, r.key)
	l, err := c.keeper.Lease(ctx, g)
	if err != nil {
		return nil, err
	}
	n.mu.Lock()
	if n.fixed {
		n.leases = append(n.leases, l)
	}
	n.mu.Unlock()
	c.startGuard(n)
	return l, nil
}
