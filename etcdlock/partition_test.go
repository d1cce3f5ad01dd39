package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/etcdproc"
	"github.com/dlockgo/dlock/internal/witness"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Partitions inside the cluster: the links between members cut by proxies
// in front of their peer ports (etcdproc.Options.PeerProxies), while every
// client still reaches the members it was given. A client of the minority
// side reaches only the member(s) cut off; a client of the majority side
// only the others. On every side of every split:
//
//   - no two holders overlap (an overlap witness over holders of both sides);
//   - a holder on the minority side is told it lost the lock (Done, or Err
//     on its own clock) before the majority grants the lock again: the
//     margin, from the loss signal to the next grant, is > 0;
//   - tokens increase strictly, across the new leader;
//   - the majority grants again, and the test reports after how long.

// partitionTTL is the session TTL of the flap test (FastElection: a 50 ms
// heartbeat, a 500 ms election timeout). An isolated etcd leader keeps
// confirming keepalives until it steps down, up to two election timeouts
// after the cut, while a new leader keeps the leases only from its
// election plus one election timeout: what a client was promised can
// outlast what the majority keeps by up to three heartbeat intervals,
// which the election margin (margin.go) covers at any TTL.
const partitionTTL = 2 * time.Second

// partitionCluster starts 3 members whose peer links a test can cut.
func partitionCluster(t *testing.T, o etcdproc.Options) *etcdproc.Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	o.NoFsync, o.PeerProxies = true, true
	c, err := etcdproc.StartCluster(ctx, 3, o)
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

func endpoints(ms []*etcdproc.Member) []string {
	eps := make([]string, len(ms))
	for i, m := range ms {
		eps[i] = m.Endpoint()
	}
	return eps
}

// sideClient returns a Client whose etcd client reaches only members.
func sideClient(t *testing.T, prefix string, ttl time.Duration, members ...*etcdproc.Member) *Client {
	t.Helper()
	c, err := New(etcdClient(t, endpoints(members)...), Config{TTL: ttl, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testPrefix returns a key prefix of t's own.
func testPrefix(t *testing.T) string { return "dlock-" + lockName(t) + "/" }

// awaitKeyCount polls until n keys are under prefix (seen through cli).
func awaitKeyCount(t *testing.T, ctx context.Context, cli *clientv3.Client, prefix string, n int64) {
	t.Helper()
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		resp, err := cli.Get(rctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err == nil && resp.Count == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d keys under %s: %v (last: %v)", n, prefix, ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
		}
	}
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

// check fails t for every violation in h and returns its figures.
func check(t *testing.T, h *witness.History) witness.Figures {
	t.Helper()
	f, errs := h.Check()
	for _, err := range errs {
		t.Error(err)
	}
	return f
}

const lockKey = "x"

// TestPartitionHolderCutOff: the holder's client reaches only the member(s)
// cut off, a waiter's only the majority. "leader isolated": the leader cut
// off from both peers while its client still reaches it; "2/1 split": a
// follower cut off while the leader keeps the majority. The holder is told
// it lost the lock before the majority grants it to the waiter; after Heal
// the holder's client takes it again. Each split at etcd's minimum TTL
// and a longer one, with a 500 ms election timeout (FastElection: minimum
// 1 s) and etcd's default 1 s (minimum 2 s; 10 s is the default TTL); the
// cut comes at a random phase of the holder's keepalives (logged).
// Before the election margin, the isolated leader's last confirmation
// outlasted the majority's lease at a 2 s TTL (the smallest margin seen
// in 5 runs: 29 ms, with the drift allowance of 22 ms).
func TestPartitionHolderCutOff(t *testing.T) {
	splits := []struct {
		name  string
		split func(c *etcdproc.Cluster, leader *etcdproc.Member) (minority, majority []*etcdproc.Member)
	}{
		{"leader isolated", func(c *etcdproc.Cluster, l *etcdproc.Member) ([]*etcdproc.Member, []*etcdproc.Member) {
			return []*etcdproc.Member{l}, c.Others(l)
		}},
		{"2/1 split", func(c *etcdproc.Cluster, l *etcdproc.Member) ([]*etcdproc.Member, []*etcdproc.Member) {
			f := c.Others(l)
			return f[1:], []*etcdproc.Member{l, f[0]}
		}},
	}
	for _, tc := range []struct {
		name    string
		fast    bool          // FastElection, else etcd's defaults
		et, ttl time.Duration // the election timeout, the session TTL
		rounds  int           // splits of each kind on one cluster
	}{
		{"fast/ttl-1s", true, 500 * time.Millisecond, time.Second, 3},
		{"fast/ttl-2s", true, 500 * time.Millisecond, 2 * time.Second, 3},
		{"default/ttl-2s", false, time.Second, 2 * time.Second, 2},
		{"default/ttl-10s", false, time.Second, 10 * time.Second, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := partitionCluster(t, etcdproc.Options{FastElection: tc.fast})
			for _, sp := range splits {
				for i := range tc.rounds {
					t.Run(fmt.Sprintf("%s/%d", sp.name, i), func(t *testing.T) {
						ctx := testCtx(t, 50*time.Second+2*tc.ttl)
						if err := c.Healthy(ctx); err != nil {
							t.Fatal(err)
						}
						leader, err := c.Leader(ctx)
						if err != nil {
							t.Fatal(err)
						}
						minority, majority := sp.split(c, leader)
						cutOff(t, ctx, c, leader, minority, majority, tc.ttl, tc.et)
					})
				}
			}
		})
	}
}

// cutOff plays one split (see witness.CutOff) with sessions of ttl and
// fails t for every violation. If the split elects a new leader (et: the
// cluster's election timeout), it also measures the margin against what
// the majority keeps: the new leader extends every lease to its first
// entry plus et plus the TTL (lessor.Promote), so the holder's lease lives
// there at least until the last moment no majority member led, plus et
// plus ttl; the holder must have been told before that.
func cutOff(t *testing.T, ctx context.Context, c *etcdproc.Cluster, leader *etcdproc.Member, minority, majority []*etcdproc.Member, ttl, et time.Duration) witness.CutOffFigures {
	t.Helper()
	prefix := testPrefix(t)
	holder := sideClient(t, prefix, ttl, minority...)
	phase := rand.N(ttl / 3)
	var cut, noLeader time.Time // the cut; the last poll that found no leader on the majority
	var elected *etcdproc.Member
	f, err := witness.CutOff{
		Minority: acquirer(holder, lockKey),
		Majority: acquirer(sideClient(t, prefix, ttl, majority...), lockKey),
		Queued: func(ctx context.Context) error { // the waiter's key is the second
			awaitKeyCount(t, ctx, etcdClient(t, endpoints(majority)...), prefix+"mutex/", 2)
			return nil
		},
		Cut: func() error {
			time.Sleep(phase)
			cut = time.Now()
			return c.Partition(minority, majority)
		},
		Heal: c.Heal,
		Elected: func(ctx context.Context) (string, error) {
			for elected == nil {
				round := time.Now()
				for _, m := range majority {
					if ok, err := m.IsLeader(ctx); err == nil && ok {
						elected = m
						break
					}
				}
				if elected == nil {
					noLeader = round
					select {
					case <-ctx.Done():
						return "", ctx.Err()
					case <-time.After(5 * time.Millisecond):
					}
				}
			}
			return leader.Name() + " -> " + elected.Name(), nil
		},
	}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept := "the leader stayed"
	if elected != leader {
		lives := noLeader.Add(et + ttl).Sub(cut) // after the cut, the least the majority keeps the lease
		kept = fmt.Sprintf("the majority keeps the lease at least %v after the cut: %v after the loss signal",
			lives.Round(time.Millisecond), (lives - f.Told).Round(time.Millisecond))
		if f.Told >= lives {
			t.Errorf("the holder cut off was told it lost the lock %v after the cut, when the majority could have let its lease expire (%v)", f.Told, lives)
		}
	}
	t.Logf("TTL %v (etcd's minimum %v, held %v past a keepalive), cut %v into the keepalive cycle: %v; %s",
		ttl, holder.minLease(), holder.keepFor(), phase.Round(time.Millisecond), f, kept)
	for _, err := range f.Violations {
		t.Error(err)
	}
	if f.Margin <= 0 {
		t.Errorf("the holder cut off was told it lost the lock %v after the majority granted it", -f.Margin)
	}
	// (Unlock of a lost lease waits for the release to reach etcd, here
	// until its bound: the holder's member is cut off.)
	if !errors.Is(f.LostErr, dlock.ErrLockLost) || !errors.Is(f.UnlockedLost, dlock.ErrLockLost) {
		t.Errorf("the cut-off holder's Err %v and Unlock %v; want ErrLockLost", f.LostErr, f.UnlockedLost)
	}
	return f
}

// TestPartitionFlap: contenders on both sides of a link that flaps — one
// member (the leader at the start) isolated and healed over and over, in
// long cuts (longer than the TTL) and short ones (blips the sessions ride
// out). Before every long cut a client of the member cut off takes the
// lock and holds it until it is told it lost it, so that every long cut
// makes the majority take the lock over from a minority holder.
func TestPartitionFlap(t *testing.T) {
	c := partitionCluster(t, etcdproc.Options{FastElection: true})
	ctx := testCtx(t, 55*time.Second)
	prefix := testPrefix(t)
	h := &witness.History{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[string]int{}
	contend := func(who, side string, cl *Client) {
		defer wg.Done()
		n := h.Contend(ctx, who, side, acquirer(cl, lockKey), 3*time.Second, 50*time.Millisecond, stop)
		mu.Lock()
		failed[side] += n
		mu.Unlock()
	}
	target, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		wg.Add(2)
		go contend(fmt.Sprintf("minority%d", i), "minority", sideClient(t, prefix, partitionTTL, target))
		go contend(fmt.Sprintf("majority%d", i), "majority", sideClient(t, prefix, partitionTTL, c.Others(target)...))
	}
	long := sideClient(t, prefix, partitionTTL, target)
	time.Sleep(time.Second)
	longCuts := 0
	for _, d := range []time.Duration{partitionTTL + time.Second, 300 * time.Millisecond, 200 * time.Millisecond,
		partitionTTL + time.Second, 500 * time.Millisecond, 100 * time.Millisecond, partitionTTL + time.Second} {
		if d > partitionTTL {
			l, err := long.Mutex(lockKey).Acquire(ctx, dlock.Wait(20*time.Second))
			if err != nil {
				t.Fatalf("the minority's long holder: %v", err)
			}
			g := h.Granted("long", "minority", l.Token())
			wg.Add(1)
			go func() {
				defer wg.Done()
				h.HoldAndUnlock(g, l, 0, stop)
			}()
			longCuts++
		}
		if err := c.Isolate(target); err != nil {
			t.Fatal(err)
		}
		time.Sleep(d)
		if err := c.Heal(); err != nil {
			t.Fatal(err)
		}
		if err := c.Healthy(ctx); err != nil {
			for _, m := range c.Members {
				t.Logf("%s running %v, log tail:\n%s", m.Name(), m.Running(), m.LogTail())
			}
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	f := check(t, h)
	if f.BySide["majority"] == 0 || f.BySide["minority"] == 0 {
		t.Errorf("grants by side: %v; want grants on both", f.BySide)
	}
	if f.Losses < longCuts {
		t.Errorf("%d holds lost in %d cuts longer than the TTL; want one a cut at least", f.Losses, longCuts)
	}
	t.Logf("%v; failed acquisitions %v", f, failed)
}

// etcd-io/etcd#11456 (Jepsen, etcd 3.4.3): "Locks return without checking
// whether the lease is still held". Here with the leader cut off from its
// peers while the waiter's client still reaches it:
//
//   - a holder H (its client on the majority) holds the lock; a waiter W,
//     whose client reaches only the leader, waits for it (its key queued,
//     its watch on the leader);
//   - right after a keepalive of W's lease, the leader is isolated. W's next
//     keepalive fails, its client gives its session up one TTL later; etcd
//     keeps the lease longer: a new leader extends every lease by an
//     election timeout when it takes over;
//   - in that window H lets go and the links heal: W's watch sees the
//     release, its key is still there, and the lock is W's — on a lease its
//     own client gave up, which etcd then expires: a third client T is
//     granted the lock while W was never told it lost it.
//
// etcd's concurrency.Mutex shows the double grant (TestRegressionEtcd11456
// Mutex asserts it does: the regression reproduced); etcdlock must not
// (TestRegressionEtcd11456).

// Timing of the #11456 scenario: a 1.5 s election timeout (heartbeat
// 150 ms); a TTL whose keepalive interval (TTL/3 = 4 s) is longer than the
// 3 s an isolated leader may go on renewing leases before it steps down
// (two election timeouts: until then its ensureLeadership check passes, as
// the member still ticks), so that W's last renewal is the one just before
// the cut. W's client gives its session up 12 s after it; etcd expires the
// lease no sooner than 15 s after (two election timeouts and the TTL).
const regressTTL = 12 * time.Second

var regressOpts = etcdproc.Options{Args: []string{"--heartbeat-interval", "150", "--election-timeout", "1500"}}

// queuedLease waits until two keys are under prefix (the holder's and the
// waiter's) and returns the lease of the later one, the waiter's.
func queuedLease(t *testing.T, ctx context.Context, admin *clientv3.Client, prefix string) clientv3.LeaseID {
	t.Helper()
	awaitKeyCount(t, ctx, admin, prefix, 2)
	resp, err := admin.Get(ctx, prefix, clientv3.WithLastCreate()...) // WithLastCreate includes WithPrefix
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("the waiter's key: %v", err)
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// isolateAfterRenewal waits until the leader renews lease (its remaining
// TTL, polled through cli, jumps back up) and isolates the leader at once;
// it returns the time of the cut.
func isolateAfterRenewal(t *testing.T, ctx context.Context, c *etcdproc.Cluster, leader *etcdproc.Member, cli *clientv3.Client, lease clientv3.LeaseID) time.Time {
	t.Helper()
	last := int64(-1)
	for {
		resp, err := cli.TimeToLive(ctx, lease)
		if err != nil {
			t.Fatal(err)
		}
		if last >= 0 && resp.TTL > last {
			break
		}
		last = resp.TTL
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Isolate(leader); err != nil {
		t.Fatal(err)
	}
	return time.Now()
}

// TestRegressionEtcd11456Mutex runs the scenario on etcd's own
// concurrency.Mutex and asserts the double grant: W's Lock returns nil
// although W's session had already ended, and T's Lock returns nil while W
// has not unlocked. A caller that checked Session.Done right after Lock
// would see the session gone; Mutex itself never checks it, and it has no
// loss signal of its own.
func TestRegressionEtcd11456Mutex(t *testing.T) {
	c := partitionCluster(t, regressOpts)
	ctx := testCtx(t, 55*time.Second)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rest := c.Others(leader)
	pfx := "regress-" + lockName(t)
	session := func(members ...*etcdproc.Member) *concurrency.Session {
		s, err := concurrency.NewSession(etcdClient(t, endpoints(members)...), concurrency.WithTTL(int(regressTTL/time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	h := &witness.History{}
	hm := concurrency.NewMutex(session(rest...), pfx)
	if err := hm.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	gh := h.Granted("H", "majority", hm.Header().Revision)
	type result struct {
		at      time.Time
		err     error
		wasDone bool // W's own session had ended when Lock returned
	}
	ws := session(leader)
	wm := concurrency.NewMutex(ws, pfx)
	waited := make(chan result, 1)
	go func() {
		err := wm.Lock(ctx)
		r := result{at: time.Now(), err: err}
		select {
		case <-ws.Done():
			r.wasDone = true
		default:
		}
		if err == nil {
			// W holds the lock until it unlocks, as Lock says; Mutex has no
			// loss signal of its own.
			h.Granted("W", "minority", wm.Header().Revision)
		}
		waited <- r
	}()
	admin := etcdClient(t, endpoints(rest)...)
	lease := queuedLease(t, ctx, admin, pfx)
	awaitWatch(t, ctx, leader)
	cut := isolateAfterRenewal(t, ctx, c, leader, etcdClient(t, leader.Endpoint()), lease)

	select {
	case <-ws.Done():
	case <-time.After(regressTTL + 5*time.Second):
		t.Fatal("the cut-off waiter's session never ended")
	}
	ended := time.Since(cut)
	h.Left(gh, false)
	if err := hm.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Since(cut)
	var r result
	select {
	case r = <-waited:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter's Lock never returned")
	}
	tm := concurrency.NewMutex(session(rest...), pfx)
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := tm.Lock(lctx); err != nil {
		t.Fatalf("the third client: %v", err)
	}
	third := time.Since(cut)
	h.Granted("T", "majority", tm.Header().Revision)
	f, _ := h.Check()
	t.Logf("after the cut: W's session ended %v, healed %v, W's Lock returned %v at %v (W's session already ended: %v), "+
		"T granted at %v; %v", ended.Round(time.Millisecond), healed.Round(time.Millisecond), r.err,
		r.at.Sub(cut).Round(time.Millisecond), r.wasDone, third.Round(time.Millisecond), f)
	if r.err != nil || !r.wasDone || f.Overlaps == 0 {
		t.Fatalf("etcd-io/etcd#11456 not reproduced on concurrency.Mutex: W's Lock returned %v (its session ended: %v), %d double grants",
			r.err, r.wasDone, f.Overlaps)
	}
	t.Logf("reproduced: concurrency.Mutex granted W the lock %v after W's client had given W's session up, and T got it %v later while W held it",
		(r.at.Sub(cut) - ended).Round(time.Millisecond), (third - r.at.Sub(cut)).Round(time.Millisecond))
}

// TestRegressionEtcd11456 runs the same scenario on etcdlock: no double
// grant. W is granted the lock only on a session its client keeps (it
// queues again on a new session when one ends), or is told it lost it
// before T is granted it.
func TestRegressionEtcd11456(t *testing.T) {
	c := partitionCluster(t, regressOpts)
	ctx := testCtx(t, 55*time.Second)
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rest := c.Others(leader)
	prefix := testPrefix(t)
	h := &witness.History{}
	held, err := sideClient(t, prefix, regressTTL, rest...).Mutex(lockKey).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gh := h.Granted("H", "majority", held.Token())
	heldLost := make(chan bool, 1)
	stopH := make(chan struct{})
	go func() { heldLost <- h.HoldAndUnlock(gh, held, 0, stopH) }()

	wc := sideClient(t, prefix, regressTTL, leader)
	waited := make(chan error, 1)
	go func() {
		l, err := wc.Mutex(lockKey).Acquire(ctx, dlock.Wait(40*time.Second))
		if err == nil {
			h.HoldAndUnlock(h.Granted("W", "minority", l.Token()), l, time.Second, ctx.Done())
		}
		waited <- err
	}()
	lease := queuedLease(t, ctx, etcdClient(t, endpoints(rest)...), prefix+"mutex/")
	awaitWatch(t, ctx, leader)
	cut := isolateAfterRenewal(t, ctx, c, leader, etcdClient(t, leader.Endpoint()), lease)

	// As with concurrency.Mutex: H lets go and the links heal once W's
	// client has given its session up, before etcd expires it.
	time.Sleep(regressTTL + 700*time.Millisecond)
	close(stopH)
	if <-heldLost {
		t.Fatal("H, on the majority, lost its lock")
	}
	if err := c.Heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Since(cut)
	l, err := sideClient(t, prefix, regressTTL, rest...).Mutex(lockKey).Acquire(ctx, dlock.Wait(30*time.Second))
	if err != nil {
		t.Fatalf("T: %v", err)
	}
	third := time.Since(cut)
	h.HoldAndUnlock(h.Granted("T", "majority", l.Token()), l, time.Millisecond, ctx.Done())
	var werr error
	select {
	case werr = <-waited:
	case <-time.After(40 * time.Second):
		t.Fatal("W's Acquire never returned")
	}
	f := check(t, h)
	var order []string
	for _, g := range h.Grants() {
		order = append(order, fmt.Sprintf("%s (token %d, lost %v)", g.Who, g.Token, !g.Lost.IsZero()))
	}
	t.Logf("after the cut: healed %v, T granted %v; W's Acquire: %v; grants in order: %v; %v",
		healed.Round(time.Millisecond), third.Round(time.Millisecond), werr, order, f)
}

// awaitWatch waits until m has a watcher: the waiter watches its
// predecessor on the member it reaches.
func awaitWatch(t *testing.T, ctx context.Context, m *etcdproc.Member) {
	t.Helper()
	for {
		v, err := m.Metric(ctx, "etcd_debugging_mvcc_watcher_total")
		if err == nil && v >= 1 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no watcher on %s: %v (last: %v, %v)", m.Name(), ctx.Err(), v, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
