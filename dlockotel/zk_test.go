package dlockotel_test

import (
	"context"
	"errors"
	"path"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlockotel"
	"github.com/dlockgo/dlock/internal/zkproc"
	"github.com/dlockgo/dlock/zklock"
	"github.com/go-zookeeper/zk"
	"go.opentelemetry.io/otel/codes"
)

// The same Observer on a real ZooKeeper (zklock): acquired, not acquired
// (a second client's refused attempt), both children of the caller's span;
// released (a hold span with the fencing token); and a hold lost when
// another session deletes its node (deleted_or_taken), with their metrics.
func TestZooKeeper(t *testing.T) {
	ctx := testCtx(t)
	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	srv, err := zkproc.Start(sctx, zkproc.Options{TickTime: 500 * time.Millisecond})
	cancel()
	if err != nil {
		t.Fatalf("ZooKeeper: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	r := newRecorder(t, dlockotel.WithBackend("zookeeper"))
	const root = "/dlockotel"
	dial := func() *zklock.Client {
		c, err := zklock.Dial(ctx, srv.Addr(), zklock.Config{Prefix: root, TTL: 5 * time.Second, Observer: r.ev})
		if err != nil {
			t.Fatalf("zklock.Dial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := dial(), dial()
	tracer := r.tp.Tracer("test")

	pctx, parent := tracer.Start(ctx, "checkout")
	l, err := a.Mutex("stock:1001").Acquire(pctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	if _, err := b.Mutex("stock:1001").Acquire(pctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("second client's acquire = %v, want ErrNotAcquired", err)
	}
	parent.End()
	acq := r.ended("dlock.acquire")
	if len(acq) != 2 {
		t.Fatalf("%d acquire spans, want 2: %v", len(acq), describe(r.spans.Ended()))
	}
	for _, s := range acq {
		childOf(t, s, parent.SpanContext()) // zklock brackets its calls (seam.Keeper.Begin: the Tracer's StartAcquire)
		wantAttrs(t, s, map[string]any{"dlock.backend": "zookeeper", "dlock.lock.shape": "mutex"})
		wantStatus(t, s, codes.Unset)
	}
	wantAttrs(t, acq[0], map[string]any{"dlock.acquire.result": "acquired"})
	wantAttrs(t, acq[1], map[string]any{"dlock.acquire.result": "not_acquired"})
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	hold := r.one(t, "dlock.hold")
	wantAttrs(t, hold, map[string]any{"dlock.backend": "zookeeper", "dlock.lock.shape": "mutex", "dlock.lock.token": l.Token()})
	wantStatus(t, hold, codes.Unset)
	r.wantHist(t, 1, "dlock.acquire.duration", "dlock.backend", "zookeeper", "dlock.acquire.result", "acquired")
	r.wantHist(t, 1, "dlock.acquire.duration", "dlock.backend", "zookeeper", "dlock.acquire.result", "not_acquired")
	r.wantHist(t, 1, "dlock.hold.duration", "dlock.backend", "zookeeper")

	// Another session deletes the holder's node.
	r.spans.Reset()
	l, err = a.Lock("stock:1002").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	deleteEphemeral(t, b.Conn(), root)
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder was not told that its node was deleted")
	}
	r.waitLost(t, 1)
	hold = r.one(t, "dlock.hold")
	wantLost(t, hold, "deleted_or_taken")
	wantAttrs(t, hold, map[string]any{"dlock.lock.shape": "lock", "dlock.lock.token": l.Token()})
	r.wantCount(t, 1, "dlock.lost_holds", "dlock.backend", "zookeeper", "dlock.lock.shape", "lock", "dlock.loss.reason", "deleted_or_taken")
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("unlock after the delete = %v, want ErrLockLost", err)
	}
	r.wantCount(t, 1, "dlock.lost_unlocks", "dlock.lock.shape", "lock")
}

// deleteEphemeral deletes every ephemeral znode under dir (the lock
// nodes: the test holds one lock at a time) and fails the test if there
// is none.
func deleteEphemeral(t *testing.T, conn *zk.Conn, dir string) {
	t.Helper()
	if n := deleteUnder(t, conn, dir); n == 0 {
		t.Fatalf("no ephemeral node under %s", dir)
	}
}

func deleteUnder(t *testing.T, conn *zk.Conn, dir string) int {
	t.Helper()
	kids, _, err := conn.Children(dir)
	if err != nil {
		t.Fatalf("children of %s: %v", dir, err)
	}
	n := 0
	for _, k := range kids {
		p := path.Join(dir, k)
		ok, st, err := conn.Exists(p)
		switch {
		case err != nil:
			t.Fatalf("exists %s: %v", p, err)
		case !ok: // gone meanwhile (an empty parent cleaned up)
		case st.EphemeralOwner != 0:
			if err := conn.Delete(p, -1); err != nil {
				t.Fatalf("delete %s: %v", p, err)
			}
			n++
		default:
			n += deleteUnder(t, conn, p)
		}
	}
	return n
}
