package zklock

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/observe"
	"github.com/go-zookeeper/zk"
)

// The guard of a held node: one data watch per hold, set when the lock is
// granted (if the hold lives for guardAfter) and set again after every
// reconnection, so a node deleted from outside (an operator's zkCli
// delete, a force unlock) loses its hold at once
// (observe.LostDeletedOrTaken) instead of at the next Verify or Unlock.
//
// One watch per hold, not one per lock directory: a node's data watch
// fires once, when the node is deleted (or its data set), while a
// directory's child watch fires at every waiter that queues or leaves and
// each firing costs a listing and a new watch. A hold that lives past
// guardAfter costs one getData request (sent after Acquire returns: it adds
// nothing to Acquire's latency), one goroutine (measured with 1000 holds: about 4 KiB of stack
// and 2 KiB of heap each), the server's watch entry, and after each
// reconnection one more getData (and one more channel in go-zookeeper's
// list of watchers of the node, until the node is deleted).

// reconnects tells guards that the connection is back: a watch set before
// may be lost (the server drops a connection's watches, and the client's
// request that sets them again can fail), so each guard looks at its node
// again and sets a new watch.
type reconnects struct {
	mu sync.Mutex
	ch chan struct{}
	// upAt is when the connection came back, in ns since epoch on the
	// monotonic clock (see settled):
	// 0 once it has been up for settle (or since the client began), -1
	// when it was last seen down.
	upAt atomic.Int64
}

func newReconnects() *reconnects { return &reconnects{ch: make(chan struct{})} }

// next returns a channel closed at the next reconnection.
func (r *reconnects) next() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ch
}

// signal reports a reconnection.
func (r *reconnects) signal() {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.ch)
	r.ch = make(chan struct{})
}

// guardAfter is how long a hold lives unwatched: its guard starts then,
// unless it was released before. A hold released sooner (most are, where
// a lock is taken per order and released at once) costs no request
// beyond its create and its delete; a holder whose node is deleted from
// outside in that time is told at guardAfter plus a round trip.
const guardAfter = 25 * time.Millisecond

// watchLater starts n's guards in guardAfter (see startGuard).
func (c *Client) watchLater(n *node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.gone && n.later == nil {
		n.later = time.AfterFunc(guardAfter, func() { c.startGuard(n) })
	}
}

// startGuard starts n's guards (one per node: a MultiLock has several)
// unless n is already gone or guarded, or the client is closed.
func (c *Client) startGuard(n *node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.gone || n.stop != nil {
		return
	}
	c.mu.Lock() // Close closes c.done under c.mu: no guard starts after Keeper.Close
	defer c.mu.Unlock()
	if c.closed() {
		return
	}
	stop := make(chan struct{})
	n.stop = stop
	c.keeper.Go(func() { c.guard(n, n.path, stop) })
	for _, p := range n.more {
		c.keeper.Go(func() { c.guard(n, p, stop) })
	}
}

// guard watches path, one of n's nodes, until n is released or lost, or
// the client closes: its deletion loses the hold, and so does the end of
// its session. While ZooKeeper cannot be asked it asks again with a
// backoff, and as soon as the connection is back and settled (see settle).
func (c *Client) guard(n *node, path string, stop <-chan struct{}) {
	backoff := 20 * time.Millisecond
	for {
		back := c.reconn.next() // before the look: a reconnection after it is seen
		ev, reason, err := c.watchHeld(n, path)
		if err != nil {
			if errors.Is(err, errClosed) {
				return
			}
			retry := time.NewTimer(backoff)
			backoff = min(2*backoff, time.Second)
			select {
			case <-retry.C:
			case <-back: // look again now: the look waits until the connection settles
				retry.Stop()
			case <-stop:
				retry.Stop()
				return
			case <-c.done:
				retry.Stop()
				return
			}
			continue
		}
		backoff = 20 * time.Millisecond
		if reason != "" {
			c.loseHeld(n, reason)
			return
		}
		select {
		case e := <-ev:
			switch e.Type {
			case zk.EventNodeDeleted:
				c.loseHeld(n, c.goneReason(n))
				return
			case zk.EventNotWatching: // the session expired or the connection was closed
				c.loseHeld(n, observe.LostExpired)
				return
			}
			// Its data was set: watch it again.
		case <-back: // reconnected: look again and watch again (once settled)
		case <-stop:
			return
		case <-c.done:
			return
		}
	}
}

// watchHeld sets a data watch on path, one of n's nodes, and returns it;
// or the reason n is lost when the node is gone or is another node; or an
// error when ZooKeeper could not be asked.
func (c *Client) watchHeld(n *node, path string) (<-chan zk.Event, observe.LostReason, error) {
	type watched struct {
		ev <-chan zk.Event
		st *zk.Stat
	}
	w, err := call(c.ctx, c, func() (watched, error) {
		// GetW, not ExistsW: on a node that is already gone it sets no
		// watch (ExistsW would leave a creation watch that never fires).
		_, st, ev, err := c.conn.GetW(path)
		return watched{ev, st}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		return nil, c.goneReason(n), nil
	case err != nil:
		return nil, "", err
	case w.st.Czxid != n.czxid || w.st.EphemeralOwner != n.sid:
		return nil, observe.LostDeletedOrTaken, nil // deleted, and another node made at its path
	}
	return w.ev, "", nil
}

// goneReason says why n's node is gone: its session ended, or someone
// deleted it.
func (c *Client) goneReason(n *node) observe.LostReason {
	if c.conn.SessionID() != n.sid {
		return observe.LostExpired
	}
	return observe.LostDeletedOrTaken
}

// loseHeld loses n's hold with reason unless n was released or lost
// already (its own release deletes the node too).
func (c *Client) loseHeld(n *node, reason observe.LostReason) {
	n.mu.Lock()
	gone, h := n.gone, n.hold
	n.mu.Unlock()
	if !gone && h != nil {
		h.Lose(reason)
	}
}
