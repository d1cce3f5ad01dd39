package drill

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// Redis is the Redis server a run uses: one the user gave, a redis-server
// started for the run, or an in-process miniredis.
type Redis struct {
	URL   string // redis://host:port/0
	Kind  string // what it is, for the first line of output
	close func() error
}

// Close stops the server if the run started it.
func (r *Redis) Close() error {
	if r.close == nil {
		return nil
	}
	return r.close()
}

// Client returns a new go-redis client on the server.
func (r *Redis) Client() (*redis.Client, error) {
	o, err := redis.ParseURL(r.URL)
	if err != nil {
		return nil, err
	}
	return redis.NewClient(o), nil
}

// ErrUnreachable wraps a server the user named that does not answer.
var ErrUnreachable = errors.New("unreachable")

// OpenRedis returns the server at url (checked with PING), or, when url is
// empty, the embedded default: a redis-server from PATH started on a free
// loopback port (removed by Close), else an in-process miniredis whose TTLs
// run on the real clock.
func OpenRedis(ctx context.Context, url string) (*Redis, error) {
	if url != "" {
		o, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("--redis %q: %w", url, err)
		}
		c := redis.NewClient(o)
		defer c.Close()
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := c.Ping(pctx).Err(); err != nil {
			return nil, fmt.Errorf("--redis %s: %w: %v", url, ErrUnreachable, err)
		}
		return &Redis{URL: url, Kind: "redis at " + o.Addr}, nil
	}
	if _, err := exec.LookPath("redis-server"); err == nil {
		s, err := redisproc.Start(ctx, redisproc.Options{})
		if err != nil {
			return nil, err
		}
		return &Redis{URL: "redis://" + s.Addr() + "/0", Kind: "redis-server (embedded, " + s.Addr() + ")", close: s.Close}, nil
	}
	m := miniredis.NewMiniRedis()
	m.ClockTTL(true)
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, err
	}
	return &Redis{URL: "redis://" + m.Addr() + "/0", Kind: "miniredis (in-process; no redis-server on PATH)", close: func() error { m.Close(); return nil }}, nil
}
