// Package redistest starts real redis-server processes for tests through
// package redisproc. Every helper registers cleanup with t.Cleanup and fails
// the test with t.Fatalf (including the install hint when redis-server is
// missing); none of them skips. Starting is bounded by 30 seconds.
package redistest

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

// startTimeout bounds each helper's startup.
const startTimeout = 30 * time.Second

func startCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	t.Cleanup(cancel)
	return ctx
}

// closeAtCleanup registers c.Close with t.Cleanup, reporting its error.
func closeAtCleanup(t testing.TB, what string, c interface{ Close() error }) {
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("redistest: closing %s: %v", what, err)
		}
	})
}

// Start starts a standalone server without persistence, with args passed to
// redis-server, and closes it at cleanup.
func Start(t testing.TB, args ...string) *redisproc.Server {
	t.Helper()
	s, err := redisproc.Start(startCtx(t), redisproc.Options{Args: args})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	closeAtCleanup(t, "redis-server "+s.Addr(), s)
	return s
}

// StartMasters starts n independent standalone servers and closes them at
// cleanup.
func StartMasters(t testing.TB, n int) []*redisproc.Server {
	t.Helper()
	servers, err := redisproc.StartMasters(startCtx(t), n, redisproc.Options{})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	for _, s := range servers {
		closeAtCleanup(t, "redis-server "+s.Addr(), s)
	}
	return servers
}

// StartSentinel starts a master with replicas and Sentinels (see
// redisproc.StartSentinel) and closes them at cleanup.
func StartSentinel(t testing.TB, o redisproc.SentinelOptions) *redisproc.Sentinel {
	t.Helper()
	s, err := redisproc.StartSentinel(startCtx(t), o)
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	closeAtCleanup(t, "sentinel setup", s)
	return s
}

// StartCluster starts a cluster of masters without replicas (see
// redisproc.StartCluster) and closes it at cleanup.
func StartCluster(t testing.TB, masters int) *redisproc.Cluster {
	t.Helper()
	c, err := redisproc.StartCluster(startCtx(t), masters, redisproc.Options{})
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	closeAtCleanup(t, "cluster", c)
	return c
}

// Client returns a client of s, closed at cleanup.
func Client(t testing.TB, s *redisproc.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	closeAtCleanup(t, "client of "+s.Addr(), c)
	return c
}

// FailoverClient returns a Sentinel-backed client of s's master, closed at
// cleanup.
func FailoverClient(t testing.TB, s *redisproc.Sentinel) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    s.MasterName,
		SentinelAddrs: s.SentinelAddrs(),
	})
	closeAtCleanup(t, "failover client", c)
	return c
}

// ClusterClient returns a client of c, closed at cleanup.
func ClusterClient(t testing.TB, c *redisproc.Cluster) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	closeAtCleanup(t, "cluster client", cc)
	return cc
}

// Paused runs fn with s paused (SIGSTOP): calls to it get no reply until fn
// returns and s is resumed. A Fatal inside fn still resumes s.
func Paused(t testing.TB, s *redisproc.Server, fn func()) {
	t.Helper()
	if err := s.Pause(); err != nil {
		t.Fatalf("pause redis-server: %v", err)
	}
	defer func() {
		if err := s.Resume(); err != nil {
			t.Errorf("resume redis-server: %v", err)
		}
	}()
	fn()
}
