package zklock

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/zkproc"
	"go.uber.org/goleak"
)

// server is the standalone ZooKeeper the package's tests share.
var server *zkproc.Server

// tick is the shared server's tickTime: sessions of 1s to 10s.
const tick = 500 * time.Millisecond

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(runChild())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := zkproc.Start(ctx, zkproc.Options{TickTime: tick})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "zklock tests need a ZooKeeper server:", err)
		os.Exit(1)
	}
	server = s
	before := goleak.IgnoreCurrent()
	code := m.Run()
	s.Close()
	if bench.srv != nil {
		bench.srv.Close()
	}
	if code == 0 {
		if err := goleak.Find(before); err != nil {
			fmt.Fprintln(os.Stderr, "leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// dial returns a client of the shared server with the given session
// timeout, closed at t's cleanup.
func dial(t testing.TB, timeout time.Duration, cfg ...Config) *Client {
	t.Helper()
	return dialAddr(t, server.Addr(), timeout, cfg...)
}

// dialAddr is dial to addr; cfg's TTL is timeout.
func dialAddr(t testing.TB, addr string, timeout time.Duration, cfg ...Config) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c0 := append(cfg, Config{})[0]
	c0.TTL = timeout
	c, err := Dial(ctx, addr, c0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
