package etcdproc

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

func start(t *testing.T, n int, o Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, n, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

func TestBinaryFromEnv(t *testing.T) {
	t.Setenv(EnvBinary, "/nonexistent/etcd")
	_, err := Binary()
	if !errors.Is(err, ErrNoEtcd) || !strings.Contains(err.Error(), "go build") {
		t.Fatalf("Binary with a missing %s: %v, want ErrNoEtcd with an install hint", EnvBinary, err)
	}
	if _, err := StartCluster(context.Background(), 1, Options{}); !errors.Is(err, ErrNoEtcd) {
		t.Fatalf("StartCluster: %v, want ErrNoEtcd", err)
	}
}

func TestBadMemberCount(t *testing.T) {
	for _, n := range []int{0, -1, 10} {
		if _, err := StartCluster(context.Background(), n, Options{}); err == nil {
			t.Errorf("%d members: no error", n)
		}
	}
}

func TestSingleMemberFaults(t *testing.T) {
	c := start(t, 1, Options{NoFsync: true})
	m := c.Members[0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Healthy(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := m.IsLeader(ctx); err != nil || !ok {
		t.Fatalf("a single member is its own leader: %v, %v", ok, err)
	}
	if v, err := m.Metric(ctx, "etcd_server_proposals_committed_total"); err != nil || v < 1 {
		t.Fatalf("proposals committed: %v, %v", v, err)
	}
	if _, err := m.Metric(ctx, "no_such_metric"); err == nil {
		t.Fatal("a missing metric has a value")
	}
	pid := m.PID()
	if pid == 0 {
		t.Fatal("no pid")
	}

	if err := m.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := m.Healthy(ctx); err == nil {
		t.Fatal("a paused member answered /health")
	}
	if err := m.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.Healthy(ctx); err != nil {
		t.Fatal(err)
	}

	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if m.Running() || m.PID() != 0 {
		t.Fatal("running after Kill")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d still exists after Kill: %v", pid, err)
	}
	if err := m.Healthy(ctx); err == nil {
		t.Fatal("a killed member answered /health")
	}
	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if m.PID() == pid || m.PID() == 0 {
		t.Fatalf("restart: pid %d, was %d", m.PID(), pid)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if m.Running() {
		t.Fatal("running after Stop")
	}
	dir := m.Dir()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory left after Close: %v", err)
	}
	if err := m.Restart(ctx); err == nil {
		t.Fatal("restart of a closed member succeeded")
	}
}

func TestClusterLeaderFailover(t *testing.T) {
	c := start(t, 3, Options{NoFsync: true, FastElection: true})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	next, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatal("the killed member is still the leader")
	}
	if err := leader.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Healthy(ctx); err != nil {
		t.Fatal(err)
	}

	// A paused leader loses its leadership to the others.
	leader, err = c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.Pause(); err != nil {
		t.Fatal(err)
	}
	next, err = c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == leader {
		t.Fatal("a paused member is the leader")
	}
	if err := leader.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := c.Healthy(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestProxyCut(t *testing.T) {
	c := start(t, 1, Options{NoFsync: true})
	p, err := NewProxy(c.Members[0].ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := &http.Client{Timeout: 500 * time.Millisecond}
	defer client.CloseIdleConnections()
	health := func() error {
		resp, err := client.Get(p.Endpoint() + "/health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `"health":"true"`) {
			return errors.New(string(body))
		}
		return nil
	}
	if err := health(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := health(); err == nil {
		t.Fatal("an answer through a cut proxy")
	}
	p.Heal()
	if err := health(); err != nil {
		t.Fatalf("after Heal: %v", err)
	}
}
