package zklock

import (
	"context"
	"errors"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/go-zookeeper/zk"
)

// remember registers a granted node (and, with key, as the owner's
// reentrant hold).
func (c *Client) remember(n *node, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live[n.path] = n
	if key != "" {
		c.reentrant[key] = n
	}
}

// forget drops n from the registry.
func (c *Client) forget(n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.live, n.path)
	for k, m := range c.reentrant {
		if m == n {
			delete(c.reentrant, k)
		}
	}
}

// gate serialises the acquisitions of one reentrant owner on one name.
type gate struct {
	ch    chan struct{}
	users int
}

// enter waits for the gate of key (or ctx, or Close) and returns its leave.
func (c *Client) enter(ctx context.Context, key string) (func(), error) {
	c.mu.Lock()
	g := c.gates[key]
	if g == nil {
		g = &gate{ch: make(chan struct{}, 1)}
		c.gates[key] = g
	}
	g.users++
	c.mu.Unlock()
	drop := func() {
		c.mu.Lock()
		if g.users--; g.users == 0 {
			delete(c.gates, key)
		}
		c.mu.Unlock()
	}
	select {
	case g.ch <- struct{}{}:
		return func() { <-g.ch; drop() }, nil
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	case <-c.done:
		drop()
		return nil, dlock.ErrClosed
	}
}

// rejoin returns the owner's live reentrant node for key with its count
// raised, or nil.
func (c *Client) rejoin(key string) *node {
	c.mu.Lock()
	n := c.reentrant[key]
	c.mu.Unlock()
	if n == nil {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.gone || n.count == 0 {
		return nil
	}
	n.count++
	return n
}

// ownedBy reports whether path is a node this client holds for owner.
func (c *Client) ownedBy(path, owner string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.live[path]
	return n != nil && n.owner == owner
}

// holdsRead reports whether owner holds a read node in dir on this client.
func (c *Client) holdsRead(dir, owner string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, n := range c.live {
		if n.kind == kindRead && n.owner == owner && len(p) > len(dir) && p[:len(dir)+1] == dir+"/" {
			return true
		}
	}
	return false
}

// lost runs when a lease of n is lost: the node is deleted (if its session
// still has it) so it blocks nobody.
func (c *Client) lost(n *node) {
	n.mu.Lock()
	already := n.end()
	if n.leaseEnd != nil {
		n.leaseEnd.Stop()
	}
	n.mu.Unlock()
	if already {
		return
	}
	c.forget(n)
	if c.conn.SessionID() == n.sid {
		_ = c.deletePath(n.path, n.sid)
	}
}

// expire ends n's fixed lease.
func (c *Client) expire(n *node) {
	for _, h := range c.keeper.Renewing() {
		if h.Ops() == dlock.GrantOps(n) {
			h.Lose(dlock.LostExpired)
		}
	}
}

// heartbeat keeps renewed holds alive: every third of the session timeout,
// while the client holds anything, it sends a cheap request; an answer in
// the holds' session moves their deadline to the request's send time plus
// the session timeout. A new session means the old one expired: its holds
// are lost. For a client made by New, whose connection's events are its
// caller's, it also looks at the connection's state every statePoll and
// tells the guards when the connection is back.
func (c *Client) heartbeat() {
	defer c.wg.Done()
	every := c.timeout / 3
	t := time.NewTimer(every)
	defer t.Stop()
	var poll <-chan time.Time
	if c.pollState {
		tk := time.NewTicker(statePoll)
		defer tk.Stop()
		poll = tk.C
	}
	for {
		select {
		case <-c.done:
			return
		case <-poll:
			c.connected(c.conn.State() == zk.StateHasSession)
			continue
		case <-t.C:
		}
		if c.beat() {
			t.Reset(every)
		} else {
			t.Reset(min(every, 100*time.Millisecond)) // try again soon
		}
	}
}

var errNotConnected = errors.New("zklock: not connected to ZooKeeper")

// statePoll is how often a client made by New looks at its connection's
// state (a local read) to learn it reconnected.
const statePoll = 50 * time.Millisecond

// connected records whether the connection is up, as the heartbeat last
// saw it: up after down is a reconnection, and the guards are told.
func (c *Client) connected(up bool) {
	if up && c.down && c.pollState {
		c.reconn.signal()
	}
	c.down = !up
}

// beat sends one heartbeat and applies its outcome to the renewed holds;
// false if it failed and holds are waiting for it. A beat that succeeds
// after one that failed is a reconnection (see connected).
func (c *Client) beat() bool {
	holds := c.keeper.Renewing()
	if len(holds) == 0 {
		return true
	}
	if c.conn.State() != zk.StateHasSession {
		// Not connected: a request would wait to go out first on the next
		// connection, in the instant go-zookeeper races with itself (see
		// settle). Try again soon.
		for _, h := range holds {
			h.RenewFailed(errNotConnected)
		}
		c.connected(false)
		return false
	}
	sid := c.conn.SessionID()
	sent := time.Now()
	_, err := call(context.Background(), c, func() (bool, error) {
		ok, _, err := c.conn.Exists("/")
		return ok, err
	})
	if errors.Is(err, errClosed) {
		return true
	}
	c.connected(err == nil)
	now := c.conn.SessionID()
	for _, h := range holds {
		n, ok := h.Ops().(*node)
		if !ok {
			continue
		}
		switch {
		case now != 0 && now != n.sid:
			h.Lose(dlock.LostExpired)
		case err == nil && sid == n.sid && now == n.sid:
			h.Renewed(sent, c.timeout)
		case err != nil:
			h.RenewFailed(err)
		}
	}
	return err == nil
}
