package zklock

import (
	"strconv"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// opSync is ZooKeeper's sync opcode.
const opSync = 9

// TestHeartbeatNeedsSync: a server that answers reads and pings but no
// sync (what a follower cut off from its leader does, on its own, for up
// to syncLimit ticks) renews nothing: the hold ends at its first deadline,
// 5/12 of the session timeout after its grant, though the connection and
// the session are alive and Verify (a read) still finds the node. A hold
// whose syncs are answered lives on past the session timeout.
func TestHeartbeatNeedsSync(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	const timeout = 3 * time.Second
	p := newProxy(t, server.Addr())
	mute := dialAddr(t, p.addr(), timeout)
	p.swallowRequests(opSync)
	start := time.Now()
	l, err := mute.Mutex(lockName(t)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	first := firstSpan(timeout) - seam.Drift(firstSpan(timeout))
	select {
	case <-l.Done():
	case <-time.After(timeout):
		t.Fatalf("a hold whose syncs go unanswered lived for the session timeout %v", timeout)
	}
	lost := time.Now()
	if lost.Before(start.Add(first)) || lost.After(granted.Add(first+300*time.Millisecond)) {
		t.Errorf("lost %v after the grant, want at its first deadline %v", lost.Sub(granted), first)
	}
	t.Logf("lost %v after the grant (first deadline %v); the session is alive: %v", lost.Sub(granted), first, mute.conn.State())

	ok := dial(t, timeout)
	l2, err := ok.Mutex(lockName(t) + "-ok").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l2.Done():
		t.Fatalf("a hold whose syncs are answered was lost: %v", l2.Err())
	case <-time.After(timeout + time.Second):
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHeartbeatKeepsMany: holds granted in a burst, and one held while the
// same client acquires and releases without pause, all live past twice the
// session timeout. (A burst's requests were merged into one candidate
// whose answer kept moving later than the heartbeat's first sync could
// prove, and a stream never let it be proven: every hold was lost as
// unreachable 5/12 of the session timeout after its grant, though nothing
// failed.)
func TestHeartbeatKeepsMany(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	const timeout = 2 * time.Second
	c := dial(t, timeout)
	name := lockName(t)
	var held []*dlock.Lease
	for i := range 50 {
		l, err := c.Mutex(name + ":" + strconv.Itoa(i)).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	// A stream of acquisitions (each a request answered within the merge
	// window, T/50, of the one before) for two session timeouts.
	end := time.Now().Add(2 * timeout)
	pairs := 0
	for time.Now().Before(end) {
		l, err := c.Mutex(name + ":stream").Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		pairs++
	}
	for i, l := range held {
		if err := l.Err(); err != nil {
			t.Fatalf("hold %d of %d lost while nothing failed (%d acquisitions streamed): %v", i, len(held), pairs, err)
		}
		if err := l.Verify(ctx); err != nil {
			t.Fatalf("hold %d: %v", i, err)
		}
	}
	t.Logf("%d holds kept for %v while %d acquisitions streamed", len(held), 2*timeout, pairs)
	for _, l := range held {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
