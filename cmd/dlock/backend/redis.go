package backend

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redisproc"
)

// openRedis opens the Redis at url, or the embedded default.
func openRedis(ctx context.Context, url string) (*Backend, error) {
	b := &Backend{Kind: Redis, Addr: url}
	if url != "" {
		o, err := ParseRedisURL(url)
		if err != nil {
			return nil, err
		}
		c := redis.NewClient(o)
		defer c.Close()
		if err := PingRedis(ctx, c, url); err != nil {
			return nil, err
		}
		b.Desc = "redis at " + o.Addr
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
const redisURLs = "want redis://host:port/db or rediss://host:port/db"

// ParseRedisURL reads a Redis URL as go-redis does: an AddrError wrapping
// ErrBadAddress if it cannot.
func ParseRedisURL(url string) (*redis.Options, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, badAddress(Redis, url, urlReason(err))
	}
	return o, nil
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
	u, err := url.Parse(s)
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
	o, err := redis.ParseURL(b.Addr)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(o), nil
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
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(ro)
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

func (c *redisClient) Close() error { return errors.Join(c.locks.Close(), c.rdb.Close()) }
