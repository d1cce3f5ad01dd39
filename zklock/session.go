package zklock

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
	"github.com/go-zookeeper/zk"
)

// The client's registry of granted nodes (by directory, for an owner's
// own holds: a reader under its own write hold, an upgrade refused) and of
// the sessions its holds were granted in (for the heartbeat).

// remember registers a granted node.
func (c *Client) remember(n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range n.paths() {
		dir := p[:strings.LastIndexByte(p, '/')]
		c.live[dir] = append(c.live[dir], n)
	}
	c.sessions[n.sid] = struct{}{}
}

// forget drops n from the registry.
func (c *Client) forget(n *node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range n.paths() {
		dir := p[:strings.LastIndexByte(p, '/')]
		ns := c.live[dir]
		for i, m := range ns {
			if m == n {
				ns[i] = ns[len(ns)-1]
				ns[len(ns)-1] = nil
				ns = ns[:len(ns)-1]
				break
			}
		}
		if len(ns) == 0 {
			delete(c.live, dir)
		} else {
			c.live[dir] = ns
		}
	}
}

// ownedBy reports whether dir/name is a node this client holds for owner.
func (c *Client) ownedBy(dir, name, owner string) bool {
	if owner == "" {
		return false
	}
	path := dir + "/" + name
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.live[dir] {
		if n.owner == owner && n.has(path) {
			return true
		}
	}
	return false
}

// has reports whether path is one of n's nodes.
func (n *node) has(path string) bool {
	if n.path == path {
		return true
	}
	for _, p := range n.more {
		if p == path {
			return true
		}
	}
	return false
}

// under returns the write node in dir that r, a read, is taken under: its
// owner's, held through this client (a downgrade); "" for none.
func (c *Client) under(r *request, dir string) string {
	if r.kind != kindRead || !r.carried {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.live[dir] {
		if n.owner == r.owner && n.kind == kindWrite {
			for _, p := range n.paths() {
				if strings.HasPrefix(p, dir+"/") {
					return p
				}
			}
		}
	}
	return ""
}

// ownKind returns the kind of a node owner holds in dir through this
// client (kindRead if it holds a read node, else kindWrite if a write
// node), or 0.
func (c *Client) ownKind(dir, owner string) byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var k byte
	for _, n := range c.live[dir] {
		if n.owner == owner && (k == 0 || n.kind == kindRead) {
			k = n.kind
		}
	}
	return k
}

// lost runs when a hold of n is lost: its nodes are deleted (if its
// session still has them) so they block nobody.
func (c *Client) lost(n *node) {
	n.mu.Lock()
	already := n.end()
	n.mu.Unlock()
	if already {
		return
	}
	c.forget(n)
	if c.conn.SessionID() == n.sid {
		for _, p := range n.paths() {
			_ = c.deletePath(p, n.sid)
		}
	}
}

// expire ends n's fixed lease (one longer than the session timeout, which
// the heartbeat keeps until then).
func (c *Client) expire(n *node) {
	n.mu.Lock()
	h := n.hold
	n.mu.Unlock()
	if h != nil {
		h.Lose(observe.LostExpired)
	}
}

// heartbeat keeps renewed holds alive by syncs (see liveness.go): one
// every third of the session timeout while the client holds anything it
// renews. An answered sync proves the session's earlier requests reached
// the leader; the holds' deadline moves to the latest proven send time
// plus the session timeout, but never past the sync's send time plus
// two thirds of it. A new session means the old one expired: its holds
// are lost. While the client holds nothing renewed, the heartbeat sleeps;
// the grant that wakes it is proven by the first sync, sent a relay
// (T/4) after that grant was answered, before its first deadline (5T/12).
// For a client made by New, whose connection's events are its caller's,
// it also looks at the connection's state every statePoll and tells the
// guards when the connection is back.
func (c *Client) heartbeat() {
	every := c.timeout / 3
	t := time.NewTimer(every)
	t.Stop()
	defer t.Stop()
	beating := false
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
		case <-c.wake:
			if _, renewed := c.keeper.Count(); !beating && renewed > 0 {
				beating = true
				due := time.Now()
				if at, ok := c.quorum.latest(c.conn.SessionID()); ok {
					due = at.Add(relay(c.timeout))
				}
				t.Reset(time.Until(due))
			}
			continue
		case <-t.C:
		}
		switch ok, idle, next := c.beat(); {
		case idle:
			beating = false // until a grant wakes it
		case ok:
			t.Reset(min(every, next))
		default:
			t.Reset(min(every, 100*time.Millisecond)) // try again soon
		}
	}
}

// woken tells the heartbeat that a renewed hold was granted.
func (c *Client) woken() {
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// errNotConnected: a request was not sent, the connection being down (see
// settled). It is retried as a lost connection is.
var errNotConnected = fmt.Errorf("not connected to ZooKeeper: %w", zk.ErrConnectionClosed)

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

// beat sends one heartbeat and applies its outcome to the renewed holds
// (renew, Keeper.LoseSession); ok is false if it failed and holds are
// waiting for it, idle true if the client holds nothing renewed (nothing
// was sent). When an answered beat proved nothing new (every request
// since the last proof was answered less than a relay before it was
// sent), next is how soon a beat can prove the oldest of them: the holds
// granted meanwhile wait for it. A beat that succeeds after one that
// failed is a reconnection (see connected).
func (c *Client) beat() (ok, idle bool, next time.Duration) {
	next = c.timeout // none sooner than the heartbeat's own pace
	if _, renewed := c.keeper.Count(); renewed == 0 {
		return true, true, next
	}
	sid := c.conn.SessionID()
	if c.conn.State() != zk.StateHasSession {
		// Not connected: a request would wait to go out first on the next
		// connection, in the instant go-zookeeper races with itself (see
		// settle). Try again soon.
		c.renewFailed(sid, errNotConnected)
		c.connected(false)
		return false, false, next
	}
	sent := time.Now()
	_, err := call(c.ctx, c, func() (string, error) {
		return c.conn.Sync("/") // answered by a follower only once its leader answered it
	})
	if errors.Is(err, errClosed) {
		return true, false, next
	}
	c.connected(err == nil)
	now := c.conn.SessionID()
	if now != 0 {
		c.mu.Lock()
		var ended []int64
		for s := range c.sessions {
			if s != now {
				ended = append(ended, s)
				delete(c.sessions, s)
			}
		}
		c.mu.Unlock()
		for _, s := range ended { // a new session: the old one expired
			c.keeper.LoseSession(s, observe.LostExpired)
		}
	}
	switch {
	case err == nil && sid == now:
		if !c.renew(now, sent) {
			if at, ok := c.quorum.provable(now, relay(c.timeout)); ok {
				next = max(time.Until(at), time.Millisecond)
			}
		}
	case err != nil:
		c.renewFailed(sid, err)
	}
	return err == nil, false, next
}

// renew applies a sync of session sid sent at sent and answered: the
// holds of the session are kept until the latest send time it proves
// plus the session timeout, at most sent + reach; a hold whose first
// deadline is later keeps that. The sync is a candidate for the next one.
// It reports whether the sync proved a later send time.
func (c *Client) renew(sid int64, sent time.Time) bool {
	base, moved := c.quorum.prove(sid, sent, relay(c.timeout))
	c.quorum.answered(sid, sent, c.timeout/50)
	if !moved {
		return false
	}
	ttl := min(c.timeout, sent.Sub(base)+reach(c.timeout))
	end := seam.LeaseEnd(base, ttl)
	for _, h := range c.keeper.Session(sid) {
		if end.After(h.Ops().first) {
			h.Renewed(base, ttl)
		}
	}
	return true
}

// renewFailed reports a failed renewal to every hold of session sid.
func (c *Client) renewFailed(sid int64, err error) {
	for _, h := range c.keeper.Session(sid) {
		h.RenewFailed(err)
	}
}
