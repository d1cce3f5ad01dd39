// Package zklock is the ZooKeeper backend of dlock: Mutex, reentrant Lock,
// RWLock, Semaphore and MultiLock, returning the same *dlock.Lease as the
// Redis shapes.
//
// A lock is a directory under the client's root; every acquisition is an
// ephemeral sequential znode in it, granted in creation order. A waiter
// watches only the node it waits for (no herd), a cancelled waiter deletes
// its node, and a dead client's nodes vanish with its session. The fencing
// token is the node's czxid, which increases across the whole ensemble.
//
// A lease is lost when the session expires, and before the quorum can
// expire it, whatever the network does: the client holds it on its
// monotonic clock only as long as its answered requests prove the
// quorum's leader keeps the session (liveness.go has the argument). While
// it holds anything it sends a sync every third of the session timeout T:
// a follower answers a sync only once its leader has, so a server cut off
// from the quorum (a follower cut from its leader; a leader cut from its
// followers, until it gives up) renews nothing it cannot vouch for. A
// lease is held until the previous answered sync was sent plus T (at most
// 2T/3 past the last one), less a drift margin; a new grant until its
// request was sent plus 5T/12, until the first sync, a quarter of T after
// the grant, renews it. So a lease ends (Done, Context cancelled with
// ErrLockLost) before the session can, after a disconnection, a pause or
// a partition inside the ensemble; a holder whose server goes silent is
// told about T/3 before the session would expire, and a holder cut off
// with an isolated leader T/3 before the majority can expire the session,
// which covers the 1.5 ticks (less 200 ms) an isolated leader can outlast
// its followers' election when T is at least 4.5 server ticks (the
// default 10 s session on ZooKeeper's default 2 s tick is 5 ticks).
// Extend can add at most 5T/12.
//
// A lease is lost too when its node is deleted from outside (an operator's
// zkCli delete or force unlock): every node held for 25 ms is watched, and
// looked at and watched again after each reconnection, so its holder is
// told within a round trip of the deletion (observe.LostDeletedOrTaken; of
// a hold younger than 25 ms, when it turns 25 ms), not at its next Verify
// or Unlock. The next waiter is granted the lock by the same deletion: the
// two overlap until then.
//
// An uncontended acquisition and its release are two requests: the
// transaction that queues the node also says whether it is alone in its
// directory (then it holds the lock, without a listing), and hands back
// the fencing token.
//
// A waiter's place in a queue lives as long as its session: a waiter that
// goes silent (killed, paused, cut off) blocks the queue until the server
// expires its session, at most the session timeout (plus one server tick)
// later. dlock.QueueTimeout(d) is therefore met by the session timeout for
// any d at least that long, and refused (ErrInvalidDuration) for a shorter
// d: make the session timeout shorter instead (Config.TTL).
package zklock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/tasks"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
)

// Defaults of a Client.
const (
	// DefaultPrefix is the znode under which locks live unless Config.Prefix
	// says otherwise.
	DefaultPrefix = "/dlock"
	// DefaultTTL is the session timeout Dial asks for unless Config.TTL
	// says otherwise.
	DefaultTTL = 10 * time.Second
)

// Config configures a Client (New, Dial). The zero Config is the defaults
// written next to each field, but for New's TTL, which only the caller
// knows. The names are those of dlock.Config and etcdlock.Config: TTL is
// how long the store keeps a client's locks past its last sign of life
// (here the session timeout), Prefix where they live.
type Config struct {
	// Prefix is the znode under which locks live (default DefaultPrefix): an
	// absolute ZooKeeper path. Clients that share locks must share it.
	Prefix string
	// TTL is the session timeout. For Dial, the one asked for (default
	// DefaultTTL, at least 10 ms); the server may grant a different one,
	// and the client holds its leases by the smaller of the two. For New
	// it is required (New fails without it, ErrInvalidArgument: no default
	// could be safe): the timeout the server negotiated for the connection
	// (if unsure, the smaller of the one asked for and the server's
	// maxSessionTimeout). A lease is held for at most this long past the
	// last request answered in the session.
	TTL time.Duration
	// ACL is the ACL of the nodes the client creates (default
	// zk.WorldACL(zk.PermAll)).
	ACL []zk.ACL
	// Logger, if set, logs lost leases (Warn) and failed renewals (Debug).
	// Without it the Client never logs.
	Logger *slog.Logger
	// Observer, if set, receives lock events (acquisitions, releases,
	// losses, renewals) synchronously: it must be fast and safe for
	// concurrent use (dlockprom, dlockotel).
	Observer observe.Observer
	// Label is added to the holder metadata that Inspect shows (service
	// name, replica id). At most 256 bytes.
	Label string

	reconn *reconnects // Dial's, told by the connection's events
}

// check returns why cfg is invalid, or nil.
func (cfg Config) check() error {
	switch r := cfg.Prefix; {
	case r != "" && (r[0] != '/' || (len(r) > 1 && r[len(r)-1] == '/') || strings.Contains(r, "//")):
		return fmt.Errorf("%w: prefix %q is not an absolute znode path", dlock.ErrInvalidArgument, r)
	case cfg.TTL != 0 && cfg.TTL < 10*time.Millisecond:
		return fmt.Errorf("%w: TTL %v (want >= 10ms)", dlock.ErrInvalidDuration, cfg.TTL)
	case len(cfg.Label) > 256:
		return fmt.Errorf("%w: label longer than 256 bytes", dlock.ErrInvalidArgument)
	}
	return nil
}

// oneConfig returns the one Config of cfg (the zero Config for none), or
// an error for more than one or an invalid one.
func oneConfig(cfg []Config) (Config, error) {
	if len(cfg) > 1 {
		return Config{}, fmt.Errorf("%w: %d Configs (want at most one)", dlock.ErrInvalidArgument, len(cfg))
	}
	c := append(cfg, Config{})[0]
	return c, c.check()
}

// Client hands out locks kept in one ZooKeeper session. It is safe for
// concurrent use.
type Client struct {
	conn    *zk.Conn
	owned   bool // Dial made conn: Close closes it
	root    string
	timeout time.Duration
	acl     []zk.ACL
	meta    string // host|pid: the fixed part of holder metadata (see nodeData)
	label   string
	keeper  *seam.Keeper[*node]
	lostFn  func(*seam.Lease) // onLost without a user's OnLost, made once

	done      chan struct{}
	ctx       context.Context // the client's own background calls; cancelled by Close
	stop      context.CancelFunc
	closeOnce sync.Once
	reconn    *reconnects   // the connection came back: guards watch again
	pollState bool          // the heartbeat tells reconn (New: no events of ours)
	down      bool          // the heartbeat's: the connection was last seen down
	wake      chan struct{} // a renewed hold was granted: the heartbeat starts
	quorum    liveness      // what the session's answered requests prove (liveness.go)
	workers   tasks.Workers // the requests that run beside their caller (see call)

	mu       sync.Mutex
	live     map[string][]*node // granted nodes by directory (an owner's own holds)
	sessions map[int64]struct{} // the sessions holds were granted in
}

// New returns a Client that keeps its locks in conn's session, configured
// by cfg (at most one Config, whose TTL is required: the
// session timeout of conn). conn stays the caller's: Close does not close
// it. The client's requests wait after each reconnection, as Dial's do;
// the caller's own requests on conn may meet go-zookeeper's race
// there (go-zookeeper/zk#35, reported by the race detector). It returns an
// error wrapping dlock.ErrInvalidArgument for a nil conn,
// a missing TTL or a bad field (ErrInvalidDuration for a bad
// duration).
func New(conn *zk.Conn, cfg ...Config) (*Client, error) {
	c, err := oneConfig(cfg)
	switch {
	case conn == nil:
		err = fmt.Errorf("%w: nil *zk.Conn", dlock.ErrInvalidArgument)
	case err == nil && c.TTL == 0:
		err = fmt.Errorf("%w: no Config.TTL (the session timeout of conn)", dlock.ErrInvalidArgument)
	}
	if err != nil {
		return nil, seam.WrapCall("new client", err)
	}
	return newClient(conn, c), nil
}

func newClient(conn *zk.Conn, cfg Config) *Client {
	host, _ := os.Hostname()
	c := &Client{
		conn: conn, root: strings.TrimSuffix(cmp.Or(cfg.Prefix, DefaultPrefix), "/"), timeout: cfg.TTL, acl: cfg.ACL,
		keeper:   seam.NewKeeper[*node](cfg.Observer, cfg.Logger),
		done:     make(chan struct{}),
		live:     make(map[string][]*node),
		sessions: make(map[int64]struct{}),
		reconn:   cfg.reconn,
		wake:     make(chan struct{}, 1),
	}
	if len(c.acl) == 0 {
		c.acl = zk.WorldACL(zk.PermAll)
	}
	c.meta = strings.ReplaceAll(host, "|", "_") + "|" + strconv.Itoa(os.Getpid())
	c.label = cfg.Label
	c.lostFn = c.lostHook(nil)
	c.ctx, c.stop = context.WithCancel(context.Background())
	if c.reconn == nil {
		c.reconn, c.pollState = newReconnects(), true
	}
	c.keeper.Go(c.heartbeat) // as are the guards: Keeper.Close waits for them
	return c
}

// TTL returns the session timeout the client holds its leases by.
func (c *Client) TTL() time.Duration { return c.timeout }

// Conn returns the ZooKeeper connection.
func (c *Client) Conn() *zk.Conn { return c.conn }

// Close loses every lease of the client at once (observe.LostClosed),
// deletes their nodes, and makes Acquire return dlock.ErrClosed. A client
// made by Dial closes its connection too: the end of its session deletes
// every node of the client at once. Close returns within
// seam.CloseTimeout (2 s) plus a round trip, whatever the number of
// leases and whether the server answers; a node it could not delete goes
// with its session. Close is idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock() // startGuard starts a guard under c.mu unless done is closed
		close(c.done)
		c.mu.Unlock()
		c.stop()
		// go-zookeeper waits up to 1 s for the reply to its close of the
		// session: the rest of the bound is Close's.
		ctx, cancel := context.WithTimeout(context.Background(), seam.CloseTimeout-time.Second)
		defer cancel()
		var release func(context.Context, []*node) int
		if c.owned {
			release = func(context.Context, []*node) int { return 0 } // the session's end deletes them
		}
		c.keeper.Close(ctx, release) // and waits for the heartbeat and the guards
		if c.owned {
			c.conn.Close()
		}
		c.workers.Close(ctx) // a request to a server that does not answer ends by ctx's bound
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
