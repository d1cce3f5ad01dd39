package backend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	neturl "net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redisproc"
)

// redisService is Redis, with the dlock package.
var redisService = Service{
	Kind: Redis, Flag: "redis", Prefix: dlock.DefaultPrefix,
	open:  openRedis,
	check: func(url string) error { _, err := parseRedisURL(url); return err },
}

// openRedis opens the Redis at url, or the embedded default.
func openRedis(ctx context.Context, url string) (*Backend, error) {
	b := &Backend{Kind: Redis, Addr: url}
	if url != "" {
		u, err := parseRedisURL(url)
		if err != nil {
			return nil, err
		}
		c := u.newClient()
		defer c.Close()
		if err := PingRedis(ctx, c, url); err != nil {
			return nil, err
		}
		b.Desc = "redis at " + u.server
	} else if _, err := exec.LookPath("redis-server"); err == nil {
		s, err := redisproc.Start(ctx, redisproc.Options{})
		if err != nil {
			return nil, err
		}
		b.Addr, b.Desc, b.close = "redis://"+s.Addr()+"/0", "redis-server (embedded, "+s.Addr()+")", s.Close
	} else {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true)
		if err := m.StartAddr("127.0.0.1:0"); err != nil {
			return nil, err
		}
		b.Addr, b.Desc = "redis://"+m.Addr()+"/0", "miniredis (in-process; no redis-server on PATH)"
		b.close = func() error { m.Close(); return nil }
	}
	addr := b.Addr
	b.newClient = func(_ context.Context, o ClientOptions) (Client, error) {
		return newRedisClient(addr, o)
	}
	return b, nil
}

// PingRedis checks within a few seconds that the Redis rdb talks to (named
// url in the error) answers: an AddrError wrapping ErrUnreachable if it
// does not.
func PingRedis(ctx context.Context, rdb redis.UniversalClient, url string) error {
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	if err := rdb.Ping(pctx).Err(); err != nil {
		return checkFailed(ctx, pctx, Redis, url, err)
	}
	return nil
}

// redisURLs is what a Redis URL looks like, for the error of one that
// cannot be read.
const redisURLs = "want redis://host:port/db, rediss://host:port/db or redis://sentinel:port/db?master_name=NAME"

// NewRedisClient returns a go-redis client for a Redis URL, read as go-redis
// reads it, without connecting: redis://host:port/db talks to that server;
// with master_name=NAME in the query the host is a Sentinel (addr=host:port
// names more of them) and the client follows NAME's master through
// failovers (go-redis's failover URL). An AddrError wrapping ErrBadAddress
// if url cannot be read.
func NewRedisClient(url string) (*redis.Client, error) {
	u, err := parseRedisURL(url)
	if err != nil {
		return nil, err
	}
	return u.newClient(), nil
}

// RedisServer says which server a Redis URL names, for messages: its
// host:port, or `master "NAME" via Sentinel host:port,...`.
func RedisServer(url string) string {
	u, err := parseRedisURL(url)
	if err != nil {
		return Redact(url)
	}
	return u.server
}

// redisURL is a Redis URL as read: the server it names, for messages, and
// how to make its client.
type redisURL struct {
	server    string
	newClient func() *redis.Client
}

// parseRedisURL reads a Redis URL (NewRedisClient).
func parseRedisURL(url string) (redisURL, error) {
	if u, err := neturl.Parse(url); err == nil && u.Query().Has("master_name") {
		o, err := redis.ParseFailoverURL(url)
		if err == nil && o.MasterName == "" {
			err = errors.New("redis: empty master_name")
		}
		if err != nil {
			return redisURL{}, badAddress(Redis, url, urlReason(err))
		}
		server := fmt.Sprintf("master %q via Sentinel %s", o.MasterName, strings.Join(o.SentinelAddrs, ","))
		return redisURL{server, func() *redis.Client { return redis.NewFailoverClient(o) }}, nil
	}
	o, err := redis.ParseURL(url)
	if err != nil {
		return redisURL{}, badAddress(Redis, url, urlReason(err))
	}
	return redisURL{o.Addr, func() *redis.Client { return redis.NewClient(o) }}, nil
}

// ParseRedisClusterURL reads the URL of a Redis Cluster node as go-redis
// does: an AddrError wrapping ErrBadAddress if it cannot.
func ParseRedisClusterURL(url string) (*redis.ClusterOptions, error) {
	o, err := redis.ParseClusterURL(url)
	if err != nil {
		return nil, badAddress(Redis, url, urlReason(err))
	}
	return o, nil
}

// urlReason is go-redis's reason for refusing a URL ("redis: invalid URL
// scheme: " → "invalid URL scheme") and what a URL looks like.
func urlReason(err error) string {
	r := strings.TrimPrefix(err.Error(), "redis: ")
	r = strings.TrimRight(r, ": ")
	return r + " (" + redisURLs + ")"
}

// Redact hides the password of a URL, for messages.
func Redact(s string) string {
	u, err := neturl.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// RedisClient returns a new go-redis client on b, a Redis backend, for
// what a drill does with Redis itself (its storage, a naive lock); the
// caller closes it.
func (b *Backend) RedisClient() (*redis.Client, error) {
	if b.Kind != Redis {
		return nil, fmt.Errorf("%s is not a Redis", b.Desc)
	}
	return NewRedisClient(b.Addr)
}

// redisClient is one actor's go-redis client and dlock client.
type redisClient struct {
	rdb     *redis.Client
	locks   *dlock.Client
	session time.Duration // the watchdog timeout
}

// newRedisClient returns a client on the Redis at url (not checked: the
// first lock call reports a server that does not answer).
func newRedisClient(url string, o ClientOptions) (Client, error) {
	if o.Session < 0 {
		return nil, fmt.Errorf("%w: negative session %v", dlock.ErrInvalidDuration, o.Session)
	}
	rdb, err := NewRedisClient(url)
	if err != nil {
		return nil, err
	}
	locks, err := dlock.New(rdb, dlock.Config{Prefix: o.Prefix, Label: o.Label, Observer: o.Observer, TTL: o.Session})
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &redisClient{rdb: rdb, locks: locks, session: cmp.Or(o.Session, dlock.DefaultTTL)}, nil
}

func (c *redisClient) Mutex(name string) dlock.Locker { return c.locks.Mutex(name) }
func (c *redisClient) Lock(name string) dlock.Locker  { return c.locks.Lock(name) }
func (c *redisClient) Session() time.Duration         { return c.session }

func (c *redisClient) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	return c.locks.Inspect(ctx, name)
}

func (c *redisClient) List(ctx context.Context, pattern string) ([]dlock.Info, error) {
	return c.locks.List(ctx, pattern)
}

func (c *redisClient) NewLister() Lister { return redisLister{c.locks.NewLister()} }

// redisLister is a dlock.Lister, which holds nothing to end.
type redisLister struct{ *dlock.Lister }

func (redisLister) Close() error { return nil }

func (c *redisClient) Close() error { return errors.Join(c.locks.Close(), c.rdb.Close()) }
