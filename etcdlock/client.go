package etcdlock

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
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

// Config configures a Client. The zero Config is the defaults written next
// to each field.
type Config struct {
	// Prefix is the prefix of every key the Client writes (default
	// DefaultPrefix). Clients that share locks must share the prefix.
	Prefix string
	// TTL is the session lease's TTL (default DefaultTTL, at least 1 s): a
	// holder that stops renewing (crashed, paused, cut off) keeps its locks
	// for at most this long, and is told it lost them before then: at its
	// last confirmed keepalive plus the TTL less 2/5 of the cluster's
	// minimum TTL (see the package doc). etcd counts TTLs in whole seconds:
	// it is rounded up, and etcd raises TTLs below its minimum (1.5
	// election timeouts rounded up, 2 s by default) to that minimum.
	TTL time.Duration
	// Logger, if set, logs lost leases (Warn) and failed renewals (Debug).
	// Without it the Client never logs.
	Logger *slog.Logger
	// Observer, if set, receives lock events (acquisitions, releases,
	// losses, renewals) synchronously: it must be fast and safe for
	// concurrent use.
	Observer observe.Observer
	// Label is added to the holder metadata that Inspect shows (service
	// name, replica id). At most 256 bytes.
	Label string
}

// apply checks cfg and sets it on c.
func (cfg Config) apply(c *Client) error {
	switch {
	case cfg.TTL != 0 && cfg.TTL < time.Second:
		return fmt.Errorf("%w: TTL %v (want >= 1s)", dlock.ErrInvalidDuration, cfg.TTL)
	case len(cfg.Label) > 256:
		return fmt.Errorf("%w: label longer than 256 bytes", dlock.ErrInvalidArgument)
	}
	c.prefix = cmp.Or(cfg.Prefix, DefaultPrefix)
	c.ttl = cmp.Or(cfg.TTL, DefaultTTL)
	c.logger, c.obs, c.label = cfg.Logger, cfg.Observer, cfg.Label
	return nil
}

// Client hands out locks on one etcd client. It owns one session lease
// (granted at the first acquisition, replaced when it ends) and one
// keepalive loop that renews it every TTL/3. A Client is safe for
// concurrent use; Close it when done.
type Client struct {
	cli    *clientv3.Client
	prefix string
	ttl    time.Duration
	obs    observe.Observer
	logger *slog.Logger
	label  string
	meta   string // host|pid, the fixed part of holder metadata
	keeper *seam.Keeper[*grantOps]
	// ownLeases groups the holds whose keys are on a lease of their own
	// (LeaseTime) as the Keeper's Session, so that they can be listed
	// (see held); nothing renews or loses them as a group.
	ownLeases *leaseGroup
	slots     slots   // of the keys' names
	orphans   orphans // the orphan marks being timed (lockdelay.go)

	bg     context.Context // background work; cancelled by Close
	stopBg context.CancelFunc
	kick   chan struct{} // a new session for the keepalive loop
	grants chan struct{} // one session grant at a time

	mu     sync.Mutex
	sess   *session      // the current session; nil before the first or after one ended
	minTTL time.Duration // the cluster's minimum lease TTL, once learned (margin.go)
	closed bool
}

// leaseGroup is the Keeper Session of the holds on leases of their own.
type leaseGroup struct{ _ byte }

// New returns a Client on cli, configured by cfg (at most one Config;
// none: the defaults). cli stays the caller's: Close does not close it,
// and a Client must be closed before its cli is.
func New(cli *clientv3.Client, cfg ...Config) (*Client, error) {
	if cli == nil {
		return nil, seam.WrapCall("new client", fmt.Errorf("%w: nil etcd client", dlock.ErrInvalidArgument))
	}
	if len(cfg) > 1 {
		return nil, seam.WrapCall("new client", fmt.Errorf("%w: %d Configs (want at most one)", dlock.ErrInvalidArgument, len(cfg)))
	}
	host, _ := os.Hostname()
	c := &Client{
		cli:       cli,
		meta:      strings.ReplaceAll(host, "|", "_") + "|" + strconv.Itoa(os.Getpid()),
		ownLeases: &leaseGroup{},
		kick:      make(chan struct{}, 1),
		grants:    make(chan struct{}, 1),
	}
	if err := append(cfg, Config{})[0].apply(c); err != nil {
		return nil, seam.WrapCall("new client", err)
	}
	c.keeper = seam.NewKeeper[*grantOps](c.obs, c.logger)
	c.bg, c.stopBg = context.WithCancel(context.Background())
	c.keeper.Go(c.keepalive) // as is background work: Keeper.Close waits for them
	return c, nil
}

// TTL returns the session lease's TTL as asked for (etcd may raise it).
func (c *Client) TTL() time.Duration { return c.ttl }

// Close reports every lease still held through this Client lost at once
// (nothing will renew it any more) and releases it in etcd if it is still
// ours (all at once), then revokes the session lease, which removes every
// key of the Client (held locks and waiting places) at once. Acquisitions
// in progress return ErrClosed. Close returns within seam.CloseTimeout (2
// s) plus a round trip, whatever the number of leases and whether etcd
// answers; a key it could not remove then goes with its lease (at most the
// TTL later). Close is idempotent; it does not close the etcd client.
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
	ctx, cancel := context.WithTimeout(context.Background(), seam.CloseTimeout)
	defer cancel()
	c.stopBg()               // acquisitions in progress and the keepalive end
	c.keeper.Close(ctx, nil) // holders are told before their keys go; waits for the keepalive
	if s != nil && s.end() {
		if _, err := c.cli.Revoke(ctx, s.id); err != nil && !isCtxErr(err) {
			return seam.WrapCall("close client", fmt.Errorf("revoking the session lease: %w (it expires within %v)", err, s.ttl))
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
	c.keeper.Go(func() { f(c.bg) })
	return true
}

// holds returns this Client's live holds.
func (c *Client) holds() []*seam.Hold[*grantOps] {
	hs := c.keeper.Session(c.ownLeases)
	c.mu.Lock()
	s := c.sess
	c.mu.Unlock()
	if s != nil {
		hs = append(hs, c.keeper.Session(s)...)
	}
	return hs
}

// held returns this Client's live hold whose Grant.Key is key, or nil.
func (c *Client) held(key string) *seam.Hold[*grantOps] {
	for _, h := range c.holds() {
		if h.Ops().hold == key {
			return h
		}
	}
	return nil
}
