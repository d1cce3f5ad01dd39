package zklock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/witness"
	"github.com/dlockgo/dlock/internal/zkproc"
)

// TestLeaderKill: SIGKILL of the ensemble's leader under contention. A
// holder whose session survives the election keeps its lock (nobody else
// gets it), no two holders overlap, acquisitions go on after the new
// leader is elected, and no orphan node blocks the queue afterwards.
func TestLeaderKill(t *testing.T) {
	ctx := testCtx(t, 2*time.Minute)
	e, err := zkproc.StartEnsemble(ctx, 3, zkproc.Options{TickTime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const timeout = 15 * time.Second
	servers := e.ConnectString()
	holder := dialAddr(t, servers, timeout)
	long, held := lockName(t)+"-held", lockName(t)+"-hot"
	kept, err := holder.Lock(long).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}

	var w witness.Witness
	var kill atomic.Int64 // unix nanos of the kill; 0 before
	var after atomic.Int64
	var mu sync.Mutex
	var grants []time.Time
	stop := make(chan struct{})
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var clients []*Client
	for range 4 {
		c := dialAddr(t, servers, timeout)
		clients = append(clients, c)
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					l, err := c.Mutex(held).Acquire(cctx)
					if err != nil {
						select {
						case <-stop: // the run is over
						default:
							errs <- err
						}
						return
					}
					w.Enter(held)
					now := time.Now()
					mu.Lock()
					grants = append(grants, now)
					mu.Unlock()
					if k := kill.Load(); k != 0 && now.UnixNano() > k {
						after.Add(1)
					}
					time.Sleep(2 * time.Millisecond)
					w.Exit(held)
					if err := l.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	time.Sleep(time.Second)
	leader, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	kill.Store(time.Now().UnixNano())
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Leader(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("a new leader %v after the kill", time.Since(time.Unix(0, kill.Load())))
	// Contention goes on until 20 acquisitions after the kill (or 30s).
	deadline := time.Now().Add(30 * time.Second)
	for after.Load() < 20 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if after.Load() < 20 { // stuck: show the queue before giving up
		admin := dialAddr(t, servers, timeout)
		dir := admin.dir("lock", held)
		ch, _, err := admin.conn.Children(dir)
		t.Logf("queue of %s (%v): %v", held, err, ch)
		for _, m := range ch {
			_, st, err := admin.conn.Get(dir + "/" + m)
			if err == nil {
				t.Logf("  %s owner session %x czxid %d", m, st.EphemeralOwner, st.Czxid)
			}
		}
		for i, c := range clients {
			t.Logf("  client %d session %x", i, c.conn.SessionID())
		}
	}
	close(stop)
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a contender: %v", err)
	}
	if o := w.Overlaps(); o != 0 {
		t.Fatalf("%d overlaps in %d entries", o, w.Entries())
	}
	if after.Load() < 20 {
		t.Fatalf("%d acquisitions in 30s after the leader was killed", after.Load())
	}
	var gap time.Duration
	var gapAt time.Time
	for i := 1; i < len(grants); i++ {
		if d := grants[i].Sub(grants[i-1]); d > gap {
			gap, gapAt = d, grants[i-1]
		}
	}
	t.Logf("the longest stretch began %v after the kill", gapAt.Sub(time.Unix(0, kill.Load())))
	t.Logf("%d grants, %d after the kill; longest stretch without a grant %v", len(grants), after.Load(), gap)

	// The long holder kept its lock through the election.
	if err := kept.Verify(ctx); err != nil {
		t.Fatalf("the holder lost its lock across the election: %v", err)
	}
	other := dialAddr(t, servers, timeout)
	if _, err := other.Lock(long).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another client got the held lock: %v", err)
	}
	if err := kept.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := other.Lock(long).Acquire(ctx, dlock.Wait(10*time.Second))
	if err != nil {
		t.Fatalf("after the holder unlocked: %v", err)
	}
	l.Unlock(context.Background())
}
