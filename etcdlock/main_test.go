package etcdlock

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/etcdproc"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// server is the single etcd member most tests share; fault tests start
// clusters of their own.
var server *etcdproc.Cluster

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		holderProcess(spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	// FastElection: etcd's shortest lease TTL is 1 s then (1.5 election
	// timeouts, rounded up), so that a QueueTimeout of 1 s is honoured.
	c, err := etcdproc.Start(ctx, etcdproc.Options{FastElection: true})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdlock tests need a real etcd:", err)
		os.Exit(1)
	}
	server = c
	code := m.Run()
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// etcdClient returns an etcd client of endpoints (default: the shared
// member), closed at t's cleanup.
func etcdClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	if len(endpoints) == 0 {
		endpoints = server.Endpoints()
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: endpoints, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second,
		Logger: zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// newClient returns a Client on its own etcd client, closed at t's cleanup.
func newClient(t testing.TB, cfg ...Config) *Client {
	t.Helper()
	return newClientOn(t, etcdClient(t), cfg...)
}

// newClientOn returns a Client on cli, closed at t's cleanup.
func newClientOn(t testing.TB, cli *clientv3.Client, cfg ...Config) *Client {
	t.Helper()
	c, err := New(cli, cfg...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// lockName returns a lock name of its own for t.
func lockName(t testing.TB) string { return t.Name() + "." + time.Now().Format("150405.000000000") }
