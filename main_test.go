package dlock_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/leakcheck"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// exampleAddr is a redis-server shared by the Example functions, which have
// no *testing.T to start their own.
var exampleAddr string

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" { // a child process of a test (see helperMain)
		os.Exit(helperMain(mode))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	srv, err := redisproc.Start(ctx, redisproc.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	exampleAddr = srv.Addr()
	code := m.Run()
	_ = srv.Close()
	if code == 0 {
		if err := leakcheck.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func exampleRedis() *redis.Client { return redis.NewClient(&redis.Options{Addr: exampleAddr}) }

// server starts a fresh redis-server and returns a go-redis client on it.
func server(t *testing.T, args ...string) *redis.Client {
	t.Helper()
	return redistest.Client(t, redistest.Start(t, args...))
}

// newClient returns a dlock Client on rdb, closed at cleanup.
func newClient(t testing.TB, rdb redis.UniversalClient, opts ...dlock.Config) *dlock.Client {
	t.Helper()
	c, err := dlock.New(rdb, opts...)
	if err != nil {
		t.Fatalf("dlock.New: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// lockers returns one Locker of each Redis shape of this issue on name.
func lockers(c *dlock.Client, name string) map[string]dlock.Locker {
	return map[string]dlock.Locker{"mutex": c.Mutex(name), "lock": c.Lock(name)}
}

// closedWithin reports whether ch is closed within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
