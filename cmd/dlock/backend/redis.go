package backend

import (
	"context"
	"fmt"
	"os/exec"

	"github.com/alicebob/miniredis/v2"
	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// openRedis opens the Redis at url, or the embedded default.
func openRedis(ctx context.Context, url string) (*Backend, error) {
	b := &Backend{Kind: Redis, Addr: url}
	if url != "" {
		o, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("redis %q: %w", url, err)
		}
		c := redis.NewClient(o)
		defer c.Close()
		pctx, cancel := context.WithTimeout(ctx, pingTimeout)
		defer cancel()
		if err := c.Ping(pctx).Err(); err != nil {
			return nil, fmt.Errorf("redis %s: %w: %v", url, ErrUnreachable, err)
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
		return NewRedisClient(addr, o)
	}
	return b, nil
}

// redisClient is one actor's go-redis client and dlock client.
type redisClient struct {
	rdb   *redis.Client
	locks *dlock.Client
}

// NewRedisClient returns a client on the Redis at url (not checked: the
// first lock call reports a server that does not answer).
func NewRedisClient(url string, o ClientOptions) (Client, error) {
	if o.Session < 0 {
		return nil, fmt.Errorf("%w: negative session %v", dlock.ErrInvalidDuration, o.Session)
	}
	ro, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(ro)
	opts := []dlock.ClientOption{dlock.WithLabel(o.Label)}
	if o.Observer != nil {
		opts = append(opts, dlock.WithObserver(o.Observer))
	}
	if o.Session > 0 {
		opts = append(opts, dlock.WithWatchdogTimeout(o.Session))
	}
	locks, err := dlock.New(rdb, opts...)
	if err != nil {
		rdb.Close()
		return nil, err
	}
	return &redisClient{rdb: rdb, locks: locks}, nil
}

func (c *redisClient) Mutex(name string) dlock.Locker { return c.locks.Mutex(name) }
func (c *redisClient) Lock(name string) dlock.Locker  { return c.locks.Lock(name) }

// Locks returns the underlying dlock client (for what only Redis has:
// Inspect, ReplicaAck).
func (c *redisClient) Locks() *dlock.Client { return c.locks }

func (c *redisClient) Close() error {
	err := c.locks.Close()
	if cerr := c.rdb.Close(); err == nil {
		err = cerr
	}
	return err
}
