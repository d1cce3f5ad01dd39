package dlock

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults of a Client.
const (
	DefaultPrefix          = "dlock:"
	DefaultWatchdogTimeout = 30 * time.Second
	DefaultFenceTTL        = 7 * 24 * time.Hour
	DefaultRenewBatch      = 256
)

// Client hands out locks on one go-redis client (standalone, Sentinel
// failover or Cluster). It owns one watchdog loop that renews every
// watchdog-kept lease in pipelined batches and one pub/sub connection that
// wakes waiters when a lock is released. A Client is safe for concurrent use;
// create one per go-redis client and Close it when done.
type Client struct {
	rdb      redis.UniversalClient
	prefix   string
	timeout  time.Duration // watchdog lease
	fenceTTL time.Duration
	batch    int
	logger   *slog.Logger
	observer Observer
	meta     string // host|pid, the fixed part of holder metadata
	label    string

	// bounded: rdb bounds every call by its ctx's deadline
	// (ContextTimeoutEnabled); else hung bounds how long a call may block
	// on a silent server before the client gives up by itself.
	bounded bool
	hung    time.Duration
	idle    chan func() // attempts handed to an idle worker (see runBeside)

	// Script arguments every lock of this Client passes, boxed once.
	argFenceTTL, argClient, argCheck any
	argLease, argQueue               any   // the default lease and queue timeout in ms
	leaseMs, queueMs                 int64 // their values
	metaHead, metaTail               string // holder metadata around the acquired-at ms

	wd  *watchdog
	sub *subscriber

	keeper *Keeper // the holds

	mu     sync.Mutex
	closed bool

	bg      context.Context // cancelled by Close: background retries stop
	stopBg  context.CancelFunc
	retries sync.WaitGroup // background retries (leaving a queue)
}

// ClientOption configures a Client.
type ClientOption func(*Client) error

// WithPrefix sets the prefix of every Redis key and channel (default "dlock:").
// It may not contain '{' or '}': the lock name is the hash tag.
func WithPrefix(p string) ClientOption {
	return func(c *Client) error {
		if strings.ContainsAny(p, "{}") {
			return fmt.Errorf("%w: prefix %q contains a brace", ErrInvalidArgument, p)
		}
		c.prefix = p
		return nil
	}
}

// WithWatchdogTimeout sets the lease of watchdog-kept locks (default 30 s);
// the watchdog renews them every timeout/3.
func WithWatchdogTimeout(d time.Duration) ClientOption {
	return func(c *Client) error {
		if d < 3*time.Millisecond {
			return fmt.Errorf("%w: watchdog timeout %v (want >= 3ms)", ErrInvalidDuration, d)
		}
		c.timeout = d
		return nil
	}
}

// WithFenceTTL sets how long a lock name's fence counter outlives its last
// grant (default 7 days). See Lease.Token for what happens after it expires.
func WithFenceTTL(d time.Duration) ClientOption {
	return func(c *Client) error {
		if d < time.Second {
			return fmt.Errorf("%w: fence TTL %v (want >= 1s)", ErrInvalidDuration, d)
		}
		c.fenceTTL = d
		return nil
	}
}

// WithRenewBatch sets how many leases the watchdog renews per round trip
// (default 256).
func WithRenewBatch(n int) ClientOption {
	return func(c *Client) error {
		if n < 1 {
			return fmt.Errorf("%w: renew batch %d (want >= 1)", ErrInvalidArgument, n)
		}
		c.batch = n
		return nil
	}
}

// WithLogger makes the Client log lost leases (Warn) and failed renewals
// (Debug). Without it the Client never logs.
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *Client) error { c.logger = l; return nil }
}

// WithObserver sends lock events (acquisitions, releases, losses, renewals)
// to o, synchronously: o must be fast and safe for concurrent use.
func WithObserver(o Observer) ClientOption {
	return func(c *Client) error {
		if o == nil {
			return fmt.Errorf("%w: nil observer", ErrInvalidArgument)
		}
		c.observer = o
		return nil
	}
}

// WithLabel adds a label (service name, replica id) to the holder metadata
// that Inspect shows. At most 256 bytes.
func WithLabel(label string) ClientOption {
	return func(c *Client) error {
		if len(label) > 256 {
			return fmt.Errorf("%w: label longer than 256 bytes", ErrInvalidArgument)
		}
		c.label = label
		return nil
	}
}

// New returns a Client on rdb. rdb stays the caller's: Close does not close it.
//
// Acquire returns by its ctx's deadline even when Redis does not answer. A
// go-redis client without ContextTimeoutEnabled waits for its ReadTimeout
// (and retries) on a silent server, whatever the ctx says; on such a
// client an attempt whose ctx has a deadline sooner than that runs on a
// goroutine of the Client's beside the wait (a few microseconds more per
// attempt). With ContextTimeoutEnabled go-redis bounds the call itself and
// every attempt runs on the caller's goroutine: set it if you can. A ctx
// cancelled without a deadline is seen at once while Acquire waits; a
// round trip already in flight then ends by the client's ReadTimeout, as
// every go-redis call does.
func New(rdb redis.UniversalClient, opts ...ClientOption) (*Client, error) {
	if rdb == nil || isNilPointer(rdb) {
		return nil, fmt.Errorf("%w: nil redis client", ErrInvalidArgument)
	}
	host, _ := os.Hostname()
	c := &Client{
		rdb:      rdb,
		prefix:   DefaultPrefix,
		timeout:  DefaultWatchdogTimeout,
		fenceTTL: DefaultFenceTTL,
		batch:    DefaultRenewBatch,
		observer: nopObserver{},
		meta:     strings.ReplaceAll(host, "|", "_") + "|" + strconv.Itoa(os.Getpid()),
	}
	for _, o := range opts {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	c.keeper = NewKeeper(c.observer, c.logger)
	c.bounded, c.hung = callBound(rdb)
	c.idle = make(chan func())
	c.bg, c.stopBg = context.WithCancel(context.Background())
	c.wd = newWatchdog(c.rdb, c.keeper, c.timeout, c.batch)
	c.sub = newSubscriber(c)
	c.leaseMs, c.queueMs = ms(c.timeout), ms(DefaultQueueTimeout)
	c.argFenceTTL, c.argClient, c.argCheck = ms(c.fenceTTL), c.sub.id, c.listenCheck()
	c.argLease, c.argQueue = c.leaseMs, c.queueMs
	c.metaHead, c.metaTail = c.meta+"|", "|"+c.label
	return c, nil
}

// Close stops the watchdog and the pub/sub connection. Every lease still held
// through this Client is released in Redis if it is still ours (compare and
// delete: nothing anyone else holds is touched) and reported lost to its
// holder, since nothing will renew it any more. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.stopBg()
	c.mu.Unlock()

	c.wd.close()
	c.retries.Wait()
	c.keeper.Close()
	return c.sub.close()
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// holderMeta is the metadata stored with a grant: host|pid|acquired-at-ms|label.
func (c *Client) holderMeta(now time.Time) string {
	return string(c.appendMeta(nil, now))
}

// appendMeta appends the holder metadata of a grant made now to b.
func (c *Client) appendMeta(b []byte, now time.Time) []byte {
	b = append(b, c.metaHead...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	return append(b, c.metaTail...)
}

// keys of one lock name; all share the hash slot of {name}.
type lockKeys struct {
	lock, fence, wake string
}

func (c *Client) keys(name string) lockKeys {
	base := c.prefix + "{" + name + "}"
	return lockKeys{lock: base, fence: base + ":fence", wake: base + ":wake"}
}

// isNilPointer reports whether v is an interface holding a nil pointer (a
// typed nil such as (*redis.Client)(nil)).
func isNilPointer(v any) bool {
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// callBound reports whether rdb bounds every call by its ctx's deadline
// (ContextTimeoutEnabled) and otherwise how long one call may block on a
// server that does not answer: every try's write and read timeouts and the
// retries' backoffs (0: unknown, or no bound at all).
func callBound(rdb redis.UniversalClient) (bool, time.Duration) {
	var bounded bool
	var tries int
	var rt, wt, backoff time.Duration
	switch r := rdb.(type) {
	case *redis.Client:
		o := r.Options()
		bounded, tries, rt, wt, backoff = o.ContextTimeoutEnabled, max(o.MaxRetries, 0)+1, o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	case *redis.ClusterClient:
		o := r.Options()
		bounded, tries, rt, wt, backoff = o.ContextTimeoutEnabled, (max(o.MaxRedirects, 0)+1)*(max(o.MaxRetries, 0)+1), o.ReadTimeout, o.WriteTimeout, o.MaxRetryBackoff
	default:
		return false, 0
	}
	if bounded {
		return true, 0
	}
	if rt <= 0 || wt <= 0 {
		return false, 0
	}
	return false, time.Duration(tries) * (rt + wt + max(backoff, 0))
}
