package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/dlockgo/dlock/internal/zkproc"
)

// Partitions inside the ensemble: the quorum and election links between
// servers cut by proxies in front of those ports (zkproc.Options.
// PeerProxies), while every client still reaches the servers it was given.
// A client of the minority side reaches only the server(s) cut off; a
// client of the majority side only the others. On every side of every
// split:
//
//   - no two holders overlap (an overlap witness over holders of both sides);
//   - a holder on the minority side is told it lost the lock (Done, or Err
//     on its own clock) before the majority grants the lock again: the
//     margin, from the loss signal to the next grant, is > 0;
//   - tokens (czxids) increase strictly, across the new leader;
//   - the majority grants again, and the test reports after how long.

// Timing of the partition tests: a 200 ms tick (syncLimit 5 ticks: a
// leader cut off gives up after 1 s, its followers elect another after
// 1 s without it) and 3 s sessions.
const (
	partitionTick    = 200 * time.Millisecond
	partitionSession = 3 * time.Second
)

// partitionEnsemble starts 3 servers whose peer links a test can cut.
func partitionEnsemble(t *testing.T, tick time.Duration) *zkproc.Ensemble {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	e, err := zkproc.StartEnsemble(ctx, 3, zkproc.Options{TickTime: tick, PeerProxies: true})
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

// sideClient returns a Client whose connection reaches only servers.
func sideClient(t *testing.T, servers ...*zkproc.Server) *Client {
	t.Helper()
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr()
	}
	return dialAddr(t, strings.Join(addrs, ","), partitionSession)
}

// acquirer takes name's Mutex through c, as the witness's helpers do.
func acquirer(c *Client, name string) witness.Acquire {
	return func(ctx context.Context, wait time.Duration) (witness.Held, error) {
		l, err := c.Mutex(name).Acquire(ctx, dlock.Wait(wait))
		if err != nil {
			return nil, err
		}
		return l, nil
	}
}

// cutOff plays one split (see witness.CutOff): the holder's client reaches
// only minority, a waiter's only majority; the cut comes held after the
// waiter queued (0: at once, while the grant is fresh; longer: after the
// heartbeat renewed it).
func cutOff(t *testing.T, ctx context.Context, e *zkproc.Ensemble, minority, majority []*zkproc.Server, held time.Duration) witness.CutOffFigures {
	t.Helper()
	old, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := lockName(t)
	b := sideClient(t, majority...)
	f, err := witness.CutOff{
		Minority: acquirer(sideClient(t, minority...), n),
		Majority: acquirer(b, n),
		Queued: func(context.Context) error {
			waitMembers(t, b, n, 2) // the waiter's node is the second
			return nil
		},
		Cut: func() error {
			time.Sleep(held)
			return e.Partition(minority, majority)
		},
		Heal: e.Heal,
		Elected: func(ctx context.Context) (string, error) {
			s, err := e.LeaderIn(ctx, majority...)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("%d -> %d", old.ID(), s.ID()), nil
		},
	}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v", f)
	if f.Margin <= 0 {
		t.Errorf("the holder cut off was told it lost the lock %v after the majority granted it", -f.Margin)
	}
	if !errors.Is(f.LostErr, dlock.ErrLockLost) || !errors.Is(f.UnlockedLost, dlock.ErrLockLost) {
		t.Errorf("the cut-off holder's Err %v and Unlock %v; want ErrLockLost", f.LostErr, f.UnlockedLost)
	}
	return f
}

// TestPartitionLeaderIsolated: the leader cut off from both peers while
// the holder's client, which reaches only the leader, still reaches it; a
// waiter's client reaches only the majority. The holder is told it lost
// the lock before the majority grants it to the waiter; after Heal the
// holder's client takes it again. The split comes at once after the grant,
// and once more after 2.5 s of heartbeats.
func TestPartitionLeaderIsolated(t *testing.T) {
	e := partitionEnsemble(t, partitionTick)
	for _, held := range []time.Duration{0, 2500 * time.Millisecond} {
		t.Run(fmt.Sprintf("held-%v", held), func(t *testing.T) {
			ctx := testCtx(t, 50*time.Second)
			leader, err := e.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			f := cutOff(t, ctx, e, []*zkproc.Server{leader}, e.Others(leader), held)
			for _, err := range f.Violations {
				t.Error(err)
			}
		})
	}
}

// TestPartitionFollowerCutOff: a 2/1 split that cuts off a follower, the
// holder's client reaching only that follower. The follower goes on
// answering reads and pings for up to syncLimit ticks after it lost its
// leader, but not syncs, which it forwards to the leader: the holder's
// heartbeats renew nothing after the cut, and its lease ends before the
// leader, which hears no more of the session, can expire it and grant the
// lock to the waiter. (Before the heartbeat was a sync, a read renewed the
// lease through the follower cut off: the holder was told 1.8 s after the
// waiter was granted the lock.)
//
// A 400 ms tick (syncLimit: 2 s of answers from the follower cut off) and
// 3 s sessions (a heartbeat a second): the follower answers reads through
// two heartbeats after the cut. The split comes at once after the grant
// (its first deadline, 5/12 of the session, stands), and once more after
// 2.5 s of heartbeats.
func TestPartitionFollowerCutOff(t *testing.T) {
	e := partitionEnsemble(t, 400*time.Millisecond)
	for _, held := range []time.Duration{0, 2500 * time.Millisecond} {
		t.Run(fmt.Sprintf("held-%v", held), func(t *testing.T) {
			ctx := testCtx(t, 50*time.Second)
			leader, err := e.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			followers := e.Others(leader)
			f := cutOff(t, ctx, e, followers[1:], []*zkproc.Server{leader, followers[0]}, held)
			for _, err := range f.Violations {
				t.Error(err)
			}
		})
	}
}

// TestPartitionSessionMoves: the leader isolated while its holder's client
// knows every server: the client moves to the majority within its session,
// and the holder keeps its lock (nobody else is granted it). A 500 ms tick
// allows a 10 s session, longer than the move (the leader gives up after
// 2.5 s, the majority elects another within a few seconds).
func TestPartitionSessionMoves(t *testing.T) {
	e := partitionEnsemble(t, 500*time.Millisecond)
	ctx := testCtx(t, 50*time.Second)
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The holder's client knows every server and is connected to the
	// leader (the client picks a server at random: dial until it is that).
	rest := e.Others(leader)
	var a *Client
	for range 50 {
		c, err := Dial(ctx, e.ConnectString(), Config{TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if c.conn.Server() == leader.Addr() {
			a = c
			break
		}
		c.Close()
	}
	if a == nil {
		t.Fatal("50 clients of the ensemble, none connected to the leader")
	}
	t.Cleanup(func() { a.Close() })
	n := lockName(t)
	held, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Isolate(leader); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	if _, err := e.LeaderIn(ctx, rest...); err != nil {
		t.Fatal(err)
	}
	b := sideClient(t, rest...)
	if _, err := b.Mutex(n).Acquire(ctx, dlock.Wait(12*time.Second)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("the majority took a lock whose holder's session moved to it: %v", err)
	}
	if err := held.Verify(ctx); err != nil || held.Err() != nil {
		t.Fatalf("the holder after its session moved: %v, %v", err, held.Err())
	}
	t.Logf("the holder's client moved to %s; it kept the lock %v after the cut (session timeout %v)",
		a.conn.Server(), time.Since(cut).Round(time.Millisecond), a.TTL())
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPartitionFlap: contenders on both sides while the links flap — the
// server that leads, or a follower, is isolated and healed, over and over,
// in long cuts (longer than the session timeout) and short ones (blips the
// sessions ride out). Before every long cut a client of the server to be
// cut alone takes the lock and holds it until it is told it lost it, so
// that every long cut makes the majority take the lock over from a holder
// cut off; the other contenders know every server and move between them.
func TestPartitionFlap(t *testing.T) {
	e := partitionEnsemble(t, partitionTick)
	ctx := testCtx(t, 90*time.Second)
	n := lockName(t)
	h := &witness.History{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := 0
	contend := func(who string, cl *Client) {
		defer wg.Done()
		n := h.Contend(ctx, who, "any", acquirer(cl, n), 3*time.Second, 50*time.Millisecond, stop)
		mu.Lock()
		failed += n
		mu.Unlock()
	}
	for i := range 3 {
		wg.Add(1)
		go contend(fmt.Sprintf("c%d", i), dialAddr(t, e.ConnectString(), partitionSession))
	}
	time.Sleep(time.Second)
	longCuts := 0
	long := partitionSession + 2*time.Second
	for i, cut := range []struct {
		d        time.Duration
		follower bool // cut a follower off, else the leader
	}{{long, false}, {300 * time.Millisecond, false}, {200 * time.Millisecond, true}, {long, true},
		{500 * time.Millisecond, false}, {100 * time.Millisecond, true}, {long, false}, {long, true}} {
		leader, err := e.Leader(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := leader
		if cut.follower {
			s = e.Others(leader)[i%2]
		}
		if cut.d > partitionSession {
			cl := sideClient(t, s)
			l, err := cl.Mutex(n).Acquire(ctx, dlock.Wait(15*time.Second))
			if err != nil {
				t.Fatalf("the long holder on server %d: %v", s.ID(), err)
			}
			g := h.Granted(fmt.Sprintf("long%d", i), "minority", l.Token())
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.HoldAndUnlock(g, l, 0, stop)
			}()
			longCuts++
		}
		if err := e.Isolate(s); err != nil {
			t.Fatal(err)
		}
		time.Sleep(cut.d)
		if err := e.Heal(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, err := e.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	f, errs := h.Check()
	for _, err := range errs {
		t.Error(err)
	}
	if f.BySide["any"] == 0 {
		t.Errorf("grants: %v; want the contenders' too", f.BySide)
	}
	if f.Losses < longCuts {
		t.Errorf("%d holds lost in %d cuts longer than the session timeout; want one a cut at least", f.Losses, longCuts)
	}
	t.Logf("%v; %d failed acquisitions", f, failed)
}
