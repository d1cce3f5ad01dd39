package etcdlock

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of a Client.
const (
	// DefaultTTL is the session lease's TTL: the longest a lock outlives
	// its holder's last confirmed keepalive.
	DefaultTTL = 10 * time.Second
	// DefaultPrefix is the prefix of every key the Client writes.
	DefaultPrefix = "dlock/"
)

// Client hands out locks on one etcd client. It owns one session lease
// (granted at the first acquisition, replaced when it ends) and one
// keepalive loop that renews it every TTL/3. A Client is safe for
// concurrent use; Close it when done.
type Client struct {
	cli    *clientv3.Client
	prefix string
	ttl    time.Duration
	obs    dlock.Observer
	logger *slog.Logger
	keeper *dlock.Keeper

	bg     context.Context // background work; cancelled by Close
	stopBg context.CancelFunc
	wg     sync.WaitGroup
	kick   chan struct{} // a new session for the keepalive loop
	grants chan struct{} // one session grant at a time

	mu     sync.Mutex
	sess   *session // the current session; nil before the first or after one ended
	closed bool

	// reentMu makes a reentrant grant's lookup, Keeper.Lease and
	// registration one step; tableMu guards reent.
	reentMu sync.Mutex
	tableMu sync.Mutex
	reent   map[string]*reentry
}

// Option configures a Client.
type Option func(*Client) error

// WithTTL sets the session lease's TTL (default 10 s): a holder that stops
// renewing (crashed, paused, cut off) keeps its locks for at most this long,
// and is told it lost them before then. etcd counts TTLs in whole seconds:
// d is rounded up, and etcd raises TTLs below its minimum (1.5 election
// timeouts, 2 s by default) to that minimum.
func WithTTL(d time.Duration) Option {
	return func(c *Client) error {
		if d < time.Second {
			return fmt.Errorf("%w: session TTL %v (want at least 1s)", dlock.ErrInvalidDuration, d)
		}
		c.ttl = d
		return nil
	}
}

// WithPrefix sets the prefix of every key the Client writes (default
// "dlock/"). Clients that share locks must share the prefix.
func WithPrefix(p string) Option {
	return func(c *Client) error {
		c.prefix = p
		return nil
	}
}

// WithObserver sends lock events (acquisitions, releases, losses,
// renewals) to o, synchronously: o must be fast and safe for concurrent use.
func WithObserver(o dlock.Observer) Option {
	return func(c *Client) error {
		c.obs = o
		return nil
	}
}

// WithLogger makes the Client log lost leases (Warn) and failed renewals
// (Debug). Without it the Client never logs.
func WithLogger(l *slog.Logger) Option {
	return func(c *Client) error {
		c.logger = l
		return nil
	}
}

// New returns a Client on cli. cli stays the caller's: Close does not close
// it, and a Client must be closed before its cli is.
func New(cli *clientv3.Client, opts ...Option) (*Client, error) {
	if cli == nil {
		return nil, fmt.Errorf("%w: nil etcd client", dlock.ErrInvalidArgument)
	}
	c := &Client{
		cli:    cli,
		prefix: DefaultPrefix,
		ttl:    DefaultTTL,
		kick:   make(chan struct{}, 1),
		grants: make(chan struct{}, 1),
		reent:  make(map[string]*reentry),
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(c); err != nil {
			return nil, err
		}
	}
	c.keeper = dlock.NewKeeper(c.obs, c.logger)
	c.bg, c.stopBg = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.keepalive()
	return c, nil
}

// TTL returns the session lease's TTL as asked for (etcd may raise it).
func (c *Client) TTL() time.Duration { return c.ttl }

// Close reports every lease still held through this Client lost (nothing
// will renew it any more) and releases it in etcd if it is still ours, then
// revokes the session lease, which removes every key of the Client (held
// locks and waiting places) at once. Acquisitions in progress return
// ErrClosed. Close is idempotent; it does not close the etcd client.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	s := c.sess
	c.sess = nil
	c.mu.Unlock()
	c.keeper.Close() // holders are told before their keys go
	c.stopBg()
	c.wg.Wait()
	if s != nil && s.end() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := c.cli.Revoke(ctx, s.id); err != nil && !isCtxErr(err) {
			return fmt.Errorf("dlock: close: revoking the session lease: %w (it expires within %v)", err, s.ttl)
		}
	}
	return nil
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// background runs f in a goroutine that Close cancels and waits for; it
// returns false (and runs nothing) once the Client is closed.
func (c *Client) background(f func(ctx context.Context)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f(c.bg)
	}()
	return true
}
