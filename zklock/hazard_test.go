package zklock

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/dlockgo/dlock/internal/zkproc"
	"github.com/dlockgo/dlock/observe"
)

// hazardSession is the session timeout of TestPausedLeaderHazard's holders.
const hazardSession = 3 * time.Second

// TestPausedLeaderHazard asks of ZooKeeper what TestEarlyRevokeHazard
// (etcdlock) asks of etcd, which ends leases early after a paused leader
// resumes: does the ensemble end a session early when its leader is paused
// past the session timeout and resumes? Each round holds locks on clients
// that reach only the followers (3 s sessions), queues a waiter behind
// each, pauses the leader for 4 s, resumes it, and has probers try the
// locks: nobody may be granted a lock while its holder still believes it
// holds it (zklock has no lock-delay: a session ended under a holder that
// still kept it would show here as a double grant). It reports the
// holders' losses by reason: "expired" is a session the ensemble ended;
// "unreachable" a hold its client gave up on its own clock. (Measured: every
// holder is told "unreachable" about a second after the pause — its server
// left the ensemble and its heartbeat, a sync, no longer proves anything —
// long before the new leader could expire its session; no session ended
// early, no double grant.)
func TestPausedLeaderHazard(t *testing.T) {
	ctx := testCtx(t, 5*time.Minute)
	e := partitionEnsemble(t, partitionTick)
	var w witness.Beliefs
	obs := &witness.Losses{}
	const rounds = 3
	for r := 1; r <= rounds; r++ {
		pausedLeaderRound(t, ctx, e, &w, obs, fmt.Sprintf("r%d", r), 4, hazardSession, hazardSession+time.Second)
	}
	grants, double := w.Check()
	t.Logf("%d rounds: holds lost %d \"expired\" (the ensemble ended a session), %d \"unreachable\" (told on the client's clock), %d \"deleted_or_taken\"; %d grants, %d double grants",
		rounds, obs.Count(observe.LostExpired), obs.Count(observe.LostUnreachable), obs.Count(observe.LostDeletedOrTaken), grants, len(double))
	for _, d := range double {
		t.Error("double grant: " + d)
	}
}

// pausedLeaderRound is one round of TestPausedLeaderHazard.
func pausedLeaderRound(t *testing.T, ctx context.Context, e *zkproc.Ensemble, w *witness.Beliefs, obs *witness.Losses, round string, names int, session, pause time.Duration) {
	t.Helper()
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var followers []string
	for _, s := range e.Servers {
		if s != leader {
			followers = append(followers, s.Addr())
		}
	}
	connect := strings.Join(followers, ",")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var clients []*Client
	for i := range names {
		name := fmt.Sprintf("%s-%s-%d", lockName(t), round, i)
		h := dialAddr(t, connect, session, Config{Observer: obs})
		q := dialAddr(t, connect, session)
		p := dialAddr(t, connect, session)
		clients = append(clients, h, q, p)
		l, err := h.Mutex(name).Acquire(ctx, dlock.Wait(10*time.Second))
		if err != nil {
			t.Fatalf("round %s: the holder: %v", round, err)
		}
		w.Granted(name, "holder", l)
		w.Contend(ctx, name, l, acquirer(q, name), acquirer(p, name), 3*pause+10*time.Second, stop, &wg)
	}
	time.Sleep(500 * time.Millisecond) // the waiters' nodes are in
	if err := leader.Pause(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(pause)
	if err := leader.Resume(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(session + 2*time.Second)
	close(stop)
	wg.Wait()
	for _, c := range clients {
		c.Close()
	}
}
