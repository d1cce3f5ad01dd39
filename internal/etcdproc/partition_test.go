package etcdproc

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/peerlink"
)

// waitFor polls cond until it returns nil or ctx ends, then fails t.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() error) time.Duration {
	t.Helper()
	t0 := time.Now()
	for {
		err := cond()
		if err == nil {
			return time.Since(t0)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// notLeader returns nil once m says it is not the leader.
func notLeader(ctx context.Context, m *Member) func() error {
	return func() error {
		ok, err := m.IsLeader(ctx)
		if err == nil && ok {
			err = errors.New(m.Name() + " still says it leads")
		}
		return err
	}
}

// noBypass fails t if a member has a connection to another's peer port
// that does not go through the proxies.
func noBypass(t *testing.T, c *Cluster) {
	t.Helper()
	for _, m := range c.Members {
		ports, err := peerlink.RemotePorts(m.PID())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range c.Others(m) {
			if slices.Contains(ports, o.peerPort) {
				t.Fatalf("%s reaches %s around the proxies (remote ports %v)", m.Name(), o.Name(), ports)
			}
		}
	}
}

// The leader isolated from its peers, while its client port still answers:
// the other two elect a leader of their own, the isolated one steps down
// (CheckQuorum) and is not healthy; after Heal all three are healthy and
// agree on one leader.
func TestIsolateLeader(t *testing.T) {
	c := start(t, 3, Options{NoFsync: true, FastElection: true, PeerProxies: true})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	old, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	noBypass(t, c)
	if err := c.Isolate(old); err != nil {
		t.Fatal(err)
	}
	rest := c.Others(old)
	t0 := time.Now()
	next, err := c.LeaderIn(ctx, rest...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the majority elected %s %v after %s was isolated", next.Name(), time.Since(t0).Round(time.Millisecond), old.Name())
	waitFor(t, ctx, "the isolated member steps down", notLeader(ctx, old))
	// Its clients still reach it; it answers, but has no leader.
	if _, err := old.Metric(ctx, "etcd_server_has_leader"); err != nil {
		t.Fatalf("the isolated member's client port: %v", err)
	}
	waitFor(t, ctx, "the isolated member has no leader", func() error {
		if v, err := old.Metric(ctx, "etcd_server_has_leader"); err != nil || v != 0 {
			return errors.New("it says it has a leader")
		}
		return nil
	})
	if err := old.Healthy(ctx); err == nil {
		t.Fatal("the isolated member says it is healthy")
	}
	for _, m := range rest {
		if err := m.Healthy(ctx); err != nil {
			t.Fatalf("%s in the majority: %v", m.Name(), err)
		}
	}
	if !c.IsCut(old, rest[0]) || c.IsCut(rest[0], rest[1]) {
		t.Fatal("IsCut does not show the isolation")
	}

	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "every member healthy after Heal", func() error {
		for _, m := range c.Members {
			if err := m.Healthy(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	leaders := 0
	for _, m := range c.Members {
		if ok, err := m.IsLeader(ctx); err == nil && ok {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d members say they lead after Heal", leaders)
	}
	noBypass(t, c)
}

// A 2/1 split with the leader in the majority: the majority keeps serving,
// the follower cut off loses its leader; then the links flap (cut and
// healed ten times) and the cluster ends healthy.
func TestSplitAndFlap(t *testing.T) {
	c := start(t, 3, Options{NoFsync: true, FastElection: true, PeerProxies: true})
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rest := c.Others(leader)
	minority := rest[1]
	if err := c.Partition([]*Member{leader, rest[0]}, []*Member{minority}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the minority follower loses its leader", func() error {
		if v, err := minority.Metric(ctx, "etcd_server_has_leader"); err != nil || v != 0 {
			return errors.New("it still has a leader")
		}
		return nil
	})
	for _, m := range []*Member{leader, rest[0]} {
		if err := m.Healthy(ctx); err != nil {
			t.Fatalf("%s in the majority: %v", m.Name(), err)
		}
	}
	if ok, err := leader.IsLeader(ctx); err != nil || !ok {
		t.Fatalf("the leader in the majority: leads %v, %v", ok, err)
	}

	for range 10 {
		if err := c.Isolate(leader); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if err := c.Heal(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	waitFor(t, ctx, "every member healthy after the flapping", func() error {
		for _, m := range c.Members {
			if err := m.Healthy(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

func TestPartitionBadInput(t *testing.T) {
	c := start(t, 3, Options{NoFsync: true, FastElection: true, PeerProxies: true})
	a, b, d := c.Members[0], c.Members[1], c.Members[2]
	for _, groups := range [][][]*Member{
		{{a, b}},         // d in no group
		{{a, b}, {b, d}}, // b twice
		{{a, b, d, {}}},  // not a member
	} {
		if err := c.Partition(groups...); err == nil {
			t.Errorf("Partition(%v): no error", groups)
		}
	}
	if c.IsCut(a, b) || c.IsCut(b, d) {
		t.Fatal("a refused Partition cut a link")
	}
	plain := start(t, 1, Options{NoFsync: true})
	if err := plain.Isolate(plain.Members[0]); !errors.Is(err, ErrNoPeerProxies) {
		t.Fatalf("Isolate without PeerProxies: %v, want ErrNoPeerProxies", err)
	}
	if err := plain.Heal(); !errors.Is(err, ErrNoPeerProxies) {
		t.Fatalf("Heal without PeerProxies: %v, want ErrNoPeerProxies", err)
	}
}
