package dlock

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock/internal/tasks"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"

	"github.com/redis/go-redis/v9"
)

// Defaults of a Client.
const (
	// DefaultPrefix is the prefix of every key and channel a Client writes
	// unless Config.Prefix says otherwise: a lock's key is
	// DefaultPrefix + "{" + name + "}".
	DefaultPrefix = "dlock:"
	// DefaultTTL is the lease of a lock acquired without
	// LeaseTime; the watchdog renews it every third of it.
	DefaultTTL = 30 * time.Second
)

// Config configures a Client. The zero Config is the defaults written next
// to each field.
type Config struct {
	// Prefix is the prefix of every Redis key and channel (default
	// DefaultPrefix). It may not contain '{' or '}': the lock name is the hash
	// tag. Clients that share locks must share the prefix.
	Prefix string
	// TTL is the lease of the locks the watchdog keeps (acquired without
	// LeaseTime; Redisson's lockWatchdogTimeout): default DefaultTTL, at
	// least 3 ms; the watchdog renews them every TTL/3, and a holder that
	// stops renewing keeps its lock at most this long. The name is the
	// same on every backend (etcdlock.Config.TTL, zklock.Config.TTL).
	TTL time.Duration
	// RenewBatch is how many leases the watchdog renews per round trip
	// (default 256).
	RenewBatch int
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
}

// apply checks cfg and sets it on c.
func (cfg Config) apply(c *Client) error {
	switch {
	case strings.ContainsAny(cfg.Prefix, "{}"):
		return fmt.Errorf("%w: prefix %q contains a brace", ErrInvalidArgument, cfg.Prefix)
	case cfg.TTL != 0 && cfg.TTL < 3*time.Millisecond:
		return fmt.Errorf("%w: TTL %v (want >= 3ms)", ErrInvalidDuration, cfg.TTL)
	case cfg.RenewBatch < 0:
		return fmt.Errorf("%w: renew batch %d (want >= 1)", ErrInvalidArgument, cfg.RenewBatch)
	case len(cfg.Label) > 256:
		return fmt.Errorf("%w: label longer than 256 bytes", ErrInvalidArgument)
	}
	c.prefix = cmp.Or(cfg.Prefix, DefaultPrefix)
	c.timeout = cmp.Or(cfg.TTL, DefaultTTL)
	c.batch = cmp.Or(cfg.RenewBatch, 256)
	c.logger, c.label = cfg.Logger, cfg.Label
	if cfg.Observer != nil {
		c.observer = cfg.Observer
	}
	return nil
}

// Client hands out locks on one go-redis client (standalone, Sentinel
// failover or Cluster). It owns one watchdog loop that renews every
// watchdog-kept lease in pipelined batches and one pub/sub connection that
// wakes waiters when a lock is released. A Client is safe for concurrent use;
// create one per go-redis client and Close it when done.
type Client struct {
	conn // the go-redis client, how calls reach it, the keys and the boxed arguments

	timeout  time.Duration // watchdog lease
	batch    int
	logger   *slog.Logger
	observer observe.Observer
	meta     string // host|pid, the fixed part of holder metadata
	label    string

	// bounded: rdb bounds every call by its ctx's deadline
	// (ContextTimeoutEnabled); else hung bounds how long a call may block
	// on a silent server before the client gives up by itself.
	bounded bool
	hung    time.Duration

	wd     *watchdog
	keeper *seam.Keeper[*attempt] // the holds

	mu      sync.Mutex
	closed  bool
	closeBy time.Time // Close's deadline, once closed

	bg       context.Context // cancelled by Close: waiters end, background retries stop
	stopBg   context.CancelFunc
	retries  tasks.Group   // goroutines Close waits for: background retries (leaving a queue), a RedLock's node calls
	workers  tasks.Workers // the attempts that run beside their caller (see runBeside)
	acquires tasks.Group   // Acquire calls in progress
}

// New returns a Client on rdb, configured by cfg (at most one Config;
// none: the defaults). rdb stays the caller's: Close does not close it.
//
// Acquire returns by its ctx's deadline even when Redis does not answer,
// whatever rdb's options say. A go-redis client without
// ContextTimeoutEnabled (the default) waits for its ReadTimeout and retries
// on a silent server whatever the ctx says. On a *redis.Client (standalone
// or Sentinel failover) the calls made under a ctx with a deadline
// (Acquire's attempts, Unlock, Extend) therefore go through a copy of rdb
// with ContextTimeoutEnabled set and every other option kept, which shares
// rdb's connection pool, so a deadline costs nothing. The copy runs none of
// the hooks added to rdb (AddHook: tracing such as redisotel, metrics of
// go-redis calls): if they must see every call dlock makes, set
// ContextTimeoutEnabled on rdb, and no copy is made (a deadline costs
// nothing then either). On a Cluster client without
// ContextTimeoutEnabled, and on a client whose
// ReadTimeout is -2 (go-redis sets no deadline), an attempt under a
// deadline runs on a goroutine of the Client's while the caller watches
// its ctx: set ContextTimeoutEnabled there to spare that hand-off. Either
// way a grant whose reply comes after the deadline, or is cut off by it,
// is given back in the background.
//
// New refuses a redis.Ring: it shards keys and pub/sub channels by its own
// hashing, so a release's wake-up would not reach a waiter on another
// shard.
//
// A ctx cancelled without a deadline is seen at once while Acquire waits;
// a round trip already in flight then ends by the client's ReadTimeout, as
// every go-redis call does.
func New(rdb redis.UniversalClient, cfg ...Config) (*Client, error) {
	if rdb == nil || isNilPointer(rdb) {
		return nil, seam.WrapCall("new client", fmt.Errorf("%w: nil redis client", ErrInvalidArgument))
	}
	if _, ring := rdb.(*redis.Ring); ring {
		// A Ring shards keys and channels by its own hashing: a release's
		// wake-up, published on the lock's shard, would not reach a waiter
		// subscribed on another.
		return nil, seam.WrapCall("new client", fmt.Errorf("%w: a redis.Ring is not supported (keys and pub/sub are sharded by the client); use a standalone, failover or Cluster client", ErrInvalidArgument))
	}
	if len(cfg) > 1 {
		return nil, seam.WrapCall("new client", fmt.Errorf("%w: %d Configs (want at most one)", ErrInvalidArgument, len(cfg)))
	}
	host, _ := os.Hostname()
	c := &Client{
		conn:     conn{rdb: rdb},
		observer: observe.Nop{},
		meta:     strings.ReplaceAll(host, "|", "_") + "|" + strconv.Itoa(os.Getpid()),
	}
	if err := append(cfg, Config{})[0].apply(c); err != nil {
		return nil, seam.WrapCall("new client", err)
	}
	c.keeper = seam.NewKeeper[*attempt](c.observer, c.logger)
	c.bounded, c.hung = callBound(rdb)
	c.bg, c.stopBg = context.WithCancel(context.Background())
	c.scripts = &scripter{rdb: rdb}
	if !c.bounded {
		c.scripts.deadlined = deadlinedCopy(rdb)
	}
	c.calls = &batcher{s: c.scripts, bg: c.bg, spawn: c.background}
	c.wd = newWatchdog(c.scripts, c.keeper, c.timeout, c.batch)
	c.sub = newSubscriber(c.bg, c.rdb, c.logger)
	c.leaseMs, c.queueMs = ms(c.timeout), ms(defaultQueueTimeout)
	c.argClient, c.argCheck = c.sub.id, c.listenCheck()
	c.argLease, c.argQueue = c.leaseMs, c.queueMs
	c.argQueueSpec = strconv.FormatInt(c.queueMs, 10) + "|" + c.sub.id
	c.metaHead, c.metaTail = c.meta+"|", "|"+c.label
	return c, nil
}

// Close stops the watchdog and the pub/sub connection. Every lease still
// held through this Client is reported lost to its holder at once (nothing
// will renew it any more) and released in Redis if it is still ours
// (compare and delete: nothing anyone else holds is touched; a re-entered
// Lock is released whole), in pipelines. Every Acquire in progress returns
// an error wrapping ErrClosed (a waiter leaves its queue first), and
// Acquire on a closed Client returns ErrClosed.
//
// Close returns within seam.CloseTimeout (2 s) plus a round trip, whatever
// the number of leases, with Redis up or down. When it returns, no
// goroutine of the Client runs and nothing more is sent, except a call
// still waiting for a Redis that does not answer: on a go-redis client
// without ContextTimeoutEnabled that call ends by the client's ReadTimeout
// (see New), after Close. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), seam.CloseTimeout)
	defer cancel()
	c.closed = true
	c.closeBy, _ = ctx.Deadline()
	c.stopBg()
	c.mu.Unlock()

	c.wd.stop()
	c.sub.stop()
	c.keeper.Close(ctx, c.releaseAll)
	err := c.sub.wait(ctx)
	c.wd.wait(ctx)
	c.acquires.Wait(ctx)
	c.workers.Close(ctx)
	c.retries.Wait(ctx)
	if err != nil {
		return seam.WrapCall("close client", err)
	}
	return nil
}

// enter counts an Acquire call that Close waits for (done ends it); false
// once the Client is closed.
func (c *Client) enter() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.acquires.Add(1)
	return true
}

// closing returns ctx bounded by Close's deadline once the Client is
// closed (a waiter's leave), else ctx.
func (c *Client) closing(ctx context.Context) (context.Context, context.CancelFunc) {
	c.mu.Lock()
	by := c.closeBy
	c.mu.Unlock()
	if by.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadline(ctx, by)
}

// releaseAll sends Close's releases (one entry per release, see
// seam.Keeper.Close): the shapes' release scripts in pipelines of at most
// RenewBatch calls, one after the other while ctx lasts; a shape that
// releases itself over several servers (a RedLock's quorum) does so beside
// them. It returns how many calls failed or were not sent.
func (c *Client) releaseAll(ctx context.Context, as []*attempt) int {
	var calls []scriptCall
	var failed atomic.Int64
	var own sync.WaitGroup
	for _, a := range as {
		if cs := a.ops.releaseCalls(); cs != nil {
			calls = append(calls, cs...)
			continue
		}
		own.Add(1)
		go func() {
			defer own.Done()
			if _, err := a.Release(ctx); err != nil {
				failed.Add(1)
			}
		}()
	}
	for i := 0; i < len(calls); i += c.batch {
		batch := calls[i:min(i+c.batch, len(calls))]
		if ctx.Err() != nil {
			failed.Add(int64(len(batch)))
			continue
		}
		for _, cmd := range c.scripts.pipelined(ctx, c.rdb.Pipeline, batch, nil) {
			if cmd.Err() != nil {
				failed.Add(1)
			}
		}
	}
	own.Wait()
	return int(failed.Load())
}

// TTL returns the lease of the locks the watchdog keeps (Config.TTL): a
// holder that stops renewing keeps its lock at most this long.
func (c *Client) TTL() time.Duration { return c.timeout }

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
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

// deadlinedCopy returns rdb with ContextTimeoutEnabled set and every other
// option kept, sharing rdb's connection pool but none of its hooks
// (go-redis's WithTimeout, the write timeout restored), for a
// *redis.Client (standalone or Sentinel failover) on which go-redis sets
// deadlines (no timeout of -2); else nil. A Cluster's copy would be a
// client of its own, with connections of its own: its calls under a
// deadline are handed off instead.
func deadlinedCopy(rdb redis.UniversalClient) redis.UniversalClient {
	r, ok := rdb.(*redis.Client)
	if !ok {
		return nil
	}
	o := r.Options()
	if o.ReadTimeout < -1 || o.WriteTimeout < -1 {
		return nil
	}
	d := r.WithTimeout(o.ReadTimeout)
	d.Options().WriteTimeout = o.WriteTimeout
	d.Options().ContextTimeoutEnabled = true
	return d
}

// listenCheck is the scripts' check flag: "1" when a hand-off must reach a
// subscriber of the waiter's Client channel (so a waiter whose Client is gone,
// cut off or not subscribed yet is passed over and keeps its place), "0" on a
// Cluster, where PUBLISH counts the subscribers of one node only.
func (c *Client) listenCheck() string {
	if _, cluster := c.rdb.(*redis.ClusterClient); cluster {
		return "0"
	}
	return "1"
}

// background runs f in a goroutine that Close waits for and reports true;
// after Close it runs nothing and reports false.
func (c *Client) background(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.retries.Add(1)
	go func() {
		defer c.retries.Done()
		f()
	}()
	return true
}
