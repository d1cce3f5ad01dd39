// Package zklock is the ZooKeeper backend of dlock: Mutex, reentrant Lock,
// RWLock and Semaphore, each a dlock.Locker returning the same *dlock.Lease
// as the Redis shapes.
//
// A lock is a directory under the client's root; every acquisition is an
// ephemeral sequential znode in it, granted in creation order. A waiter
// watches only the node it waits for (no herd), a cancelled waiter deletes
// its node, and a dead client's nodes vanish with its session. The fencing
// token is the node's czxid, which increases across the whole ensemble.
//
// A lease is lost when the session expires, and before that: it is held on
// the client's monotonic clock until the last request answered in the
// session was sent plus the session timeout, less a drift margin. The
// client sends a cheap request every third of the session timeout while it
// holds anything, so a lease lasts as long as the session and ends (Done,
// Context cancelled with ErrLockLost) before the server can expire the
// session after a disconnection or a pause.
//
// A lease is lost too when its node is deleted from outside (an operator's
// zkCli delete or force unlock): every held node is watched, and looked at
// and watched again after each reconnection, so its holder is told within
// a round trip of the deletion (dlock.LostDeletedOrTaken), not at its next
// Verify or Unlock. The next waiter is granted the lock by the same
// deletion: the two overlap for that round trip.
package zklock

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/go-zookeeper/zk"
)

// DefaultRoot is the znode under which locks live unless Root says otherwise.
const DefaultRoot = "/dlock"

// Client hands out locks kept in one ZooKeeper session. It is safe for
// concurrent use.
type Client struct {
	conn    *zk.Conn
	owned   bool // Dial made conn: Close closes it
	root    string
	timeout time.Duration
	acl     []zk.ACL
	keeper  *dlock.Keeper

	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	reconn    *reconnects // the connection came back: guards watch again
	pollState bool        // the heartbeat tells reconn (New: no events of ours)
	down      bool        // the heartbeat's: the connection was last seen down

	mu        sync.Mutex
	reentrant map[string]*node // live reentrant holds by owner key
	live      map[string]*node // live granted nodes by path
	gates     map[string]*gate // reentrant acquisitions in progress by owner key
}

// Option configures New and Dial.
type Option func(*config) error

type config struct {
	root     string
	timeout  time.Duration
	acl      []zk.ACL
	observer dlock.Observer
	logger   *slog.Logger
	reconn   *reconnects // Dial's, told by the connection's events
}

// Root sets the znode under which locks live (default DefaultRoot). It must
// be an absolute ZooKeeper path.
func Root(path string) Option {
	return func(c *config) error {
		if path == "" || path[0] != '/' || (len(path) > 1 && path[len(path)-1] == '/') {
			return fmt.Errorf("%w: zklock: root %q is not an absolute znode path", dlock.ErrInvalidArgument, path)
		}
		c.root = path
		return nil
	}
}

// SessionTimeout is the session timeout the server negotiated for conn
// (New needs it: a lease is held for at most this long past the last
// answered request). Dial sets it from the server's answer.
func SessionTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 10*time.Millisecond {
			return fmt.Errorf("%w: zklock: session timeout %v", dlock.ErrInvalidDuration, d)
		}
		c.timeout = d
		return nil
	}
}

// ACL sets the ACL of the nodes the client creates (default zk.WorldACL(zk.PermAll)).
func ACL(acl []zk.ACL) Option {
	return func(c *config) error {
		if len(acl) == 0 {
			return fmt.Errorf("%w: zklock: empty ACL", dlock.ErrInvalidArgument)
		}
		c.acl = acl
		return nil
	}
}

// WithObserver reports acquisitions, renewals, releases and losses to o.
func WithObserver(o dlock.Observer) Option {
	return func(c *config) error { c.observer = o; return nil }
}

// WithLogger logs losses (Warn) and failed renewals (Debug) to l.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error { c.logger = l; return nil }
}

// New returns a Client that keeps its locks in conn's session. conn stays
// the caller's: Close does not close it. SessionTimeout is required (the
// timeout the server negotiated for conn; if unsure, the smaller of the one
// asked for and the server's maxSessionTimeout). It returns an error
// wrapping dlock.ErrInvalidArgument for a nil conn or a bad option.
func New(conn *zk.Conn, opts ...Option) (*Client, error) {
	if conn == nil {
		return nil, fmt.Errorf("%w: zklock: nil *zk.Conn", dlock.ErrInvalidArgument)
	}
	cfg := config{root: DefaultRoot, acl: zk.WorldACL(zk.PermAll)}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: zklock: nil option", dlock.ErrInvalidArgument)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.timeout == 0 {
		return nil, fmt.Errorf("%w: zklock: New needs the SessionTimeout option (the session timeout of conn)", dlock.ErrInvalidArgument)
	}
	c := &Client{
		conn: conn, root: cfg.root, timeout: cfg.timeout, acl: cfg.acl,
		keeper:    dlock.NewKeeper(cfg.observer, cfg.logger),
		done:      make(chan struct{}),
		reentrant: make(map[string]*node),
		live:      make(map[string]*node),
		gates:     make(map[string]*gate),
		reconn:    cfg.reconn,
	}
	if c.reconn == nil {
		c.reconn, c.pollState = newReconnects(), true
	}
	c.wg.Add(1)
	go c.heartbeat()
	return c, nil
}

// SessionTimeout returns the session timeout the client holds its leases by.
func (c *Client) SessionTimeout() time.Duration { return c.timeout }

// Conn returns the ZooKeeper connection.
func (c *Client) Conn() *zk.Conn { return c.conn }

// Close loses every lease of the client (dlock.LostClosed), deletes their
// nodes, and makes Acquire return dlock.ErrClosed. A client made by Dial
// closes its connection too (its session ends). Close is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock() // startGuard adds to c.wg under c.mu unless done is closed
		close(c.done)
		c.mu.Unlock()
		c.keeper.Close()
		c.wg.Wait()
		if c.owned {
			c.conn.Close()
		}
	})
	return nil
}

// closed reports whether Close was called.
func (c *Client) closed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

var errClosed = errors.New("closed")

// opErr names the operation and lock once, as dlock's own errors do.
func opErr(op, name string, err error) error {
	return fmt.Errorf("zklock: %s %q: %w", op, name, err)
}
