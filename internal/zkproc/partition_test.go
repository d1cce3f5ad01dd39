package zkproc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/peerlink"
)

// waitFor polls cond until it returns nil or ctx ends, then fails t.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() error) {
	t.Helper()
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serving returns nil once every server says it leads or follows.
func serving(ctx context.Context, servers ...*Server) func() error {
	return func() error {
		for _, s := range servers {
			m, err := s.Mode(ctx)
			if err != nil {
				return fmt.Errorf("server %d: %w", s.ID(), err)
			}
			if m != "leader" && m != "follower" {
				return fmt.Errorf("server %d: mode %q", s.ID(), m)
			}
		}
		return nil
	}
}

// notServing returns nil once s says it serves no client.
func notServing(ctx context.Context, s *Server) func() error {
	return func() error {
		if m, err := s.Mode(ctx); err == nil {
			return fmt.Errorf("server %d still serves as %s", s.ID(), m)
		}
		return nil
	}
}

// noBypass fails t if a server has a connection to another's quorum or
// election port that does not go through the proxies.
func noBypass(t *testing.T, e *Ensemble) {
	t.Helper()
	for _, s := range e.Servers {
		ports, err := peerlink.RemotePorts(s.PID())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range e.Others(s) {
			if slices.Contains(ports, o.peer.quorum) || slices.Contains(ports, o.peer.election) {
				t.Fatalf("server %d reaches server %d around the proxies (remote ports %v, its ports %v)", s.ID(), o.ID(), ports, o.peer)
			}
		}
	}
}

func startEnsemble(t *testing.T) *Ensemble {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e, err := StartEnsemble(ctx, 3, Options{TickTime: 200 * time.Millisecond, PeerProxies: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// The leader isolated from its peers (quorum and election links), while
// its client port still answers: the other two elect a leader of their
// own, the isolated one stops serving; after Heal all three serve under
// one leader.
func TestIsolateLeader(t *testing.T) {
	e := startEnsemble(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	old, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	noBypass(t, e)
	if err := e.Isolate(old); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	rest := e.Others(old)
	next, err := e.LeaderIn(ctx, rest...)
	if err != nil {
		t.Fatal(err)
	}
	if next == old {
		t.Fatal("the isolated server leads the majority")
	}
	t.Logf("the majority elected server %d %v after server %d was isolated", next.ID(), time.Since(t0).Round(time.Millisecond), old.ID())
	waitFor(t, ctx, "the majority serves", serving(ctx, rest...))
	// Its client port still answers (srvr), but it serves nothing: it can
	// never rejoin through a cut link.
	waitFor(t, ctx, "the isolated server stops serving", notServing(ctx, old))
	if _, err := FourLetter(ctx, old.Addr(), "ruok"); err != nil {
		t.Fatalf("the isolated server's client port: %v", err)
	}
	time.Sleep(2 * time.Second) // ten ticks: long enough to rejoin if a link leaked
	if err := notServing(ctx, old)(); err != nil {
		t.Fatalf("the isolated server rejoined: %v", err)
	}

	if err := e.Heal(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "every server serves after Heal", serving(ctx, e.Servers...))
	if _, err := e.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	noBypass(t, e)
}

// A 2/1 split with the leader in the majority keeps it serving and cuts
// the follower off; then the leader's links flap and the ensemble ends
// serving.
func TestSplitAndFlap(t *testing.T) {
	e := startEnsemble(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rest := e.Others(leader)
	if err := e.Partition([]*Server{leader, rest[0]}, []*Server{rest[1]}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the minority follower stops serving", notServing(ctx, rest[1]))
	if err := serving(ctx, leader, rest[0])(); err != nil {
		t.Fatalf("the majority: %v", err)
	}
	if m, err := leader.Mode(ctx); err != nil || m != "leader" {
		t.Fatalf("the leader in the majority: %q, %v", m, err)
	}
	for range 8 {
		if err := e.Isolate(leader); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
		if err := e.Heal(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(400 * time.Millisecond)
	}
	waitFor(t, ctx, "every server serves after the flapping", serving(ctx, e.Servers...))
	if _, err := e.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	noBypass(t, e)
}

func TestRewriteElectionAddr(t *testing.T) {
	greeting := func(version int64, addr string) []byte {
		var b bytes.Buffer
		binary.Write(&b, binary.BigEndian, version)
		binary.Write(&b, binary.BigEndian, int64(2))
		binary.Write(&b, binary.BigEndian, int32(len(addr)))
		b.WriteString(addr)
		return b.Bytes()
	}
	proxyOf := func(p int) (int, bool) { return map[int]int{5000: 6000}[p], p == 5000 }
	for _, c := range []struct{ in, want string }{
		{"127.0.0.1:5000", "127.0.0.1:6000"},
		{"127.0.0.1:5001", "127.0.0.1:5001"},
		{"127.0.0.1:5000|127.0.0.2:5000", "127.0.0.1:6000|127.0.0.2:6000"},
	} {
		got, err := rewriteElectionAddr(bytes.NewReader(append(greeting(-65536, c.in), "rest"...)), proxyOf)
		if err != nil || !bytes.Equal(got, greeting(-65536, c.want)) {
			t.Errorf("%q: %q, %v; want %q", c.in, got, err, greeting(-65536, c.want))
		}
	}
	old := make([]byte, 8)
	binary.BigEndian.PutUint64(old, 3)
	if got, err := rewriteElectionAddr(bytes.NewReader(old), proxyOf); err != nil || !bytes.Equal(got, old) {
		t.Errorf("an old greeting: %q, %v", got, err)
	}
	bad := greeting(-65536, "")
	if _, err := rewriteElectionAddr(bytes.NewReader(bad), proxyOf); err == nil {
		t.Error("a greeting without an address passed")
	}
	if _, err := rewriteElectionAddr(bytes.NewReader(bad[:10]), proxyOf); err == nil {
		t.Error("a cut greeting passed")
	}
	plain, err := StartEnsemble(context.Background(), 0, Options{})
	if err == nil {
		plain.Close()
		t.Fatal("an ensemble of 0 servers")
	}
	if err := (&Ensemble{}).Isolate(nil); !errors.Is(err, ErrNoPeerProxies) {
		t.Fatalf("Isolate without PeerProxies: %v", err)
	}
}
