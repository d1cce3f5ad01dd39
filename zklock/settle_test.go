package zklock

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// TestReconnectWithWatches: requests made while the connection is down
// wait until it is back and settled, instead of going out first on the new
// connection while go-zookeeper sends its watches again (it reads the last
// zxid seen there, which its receiving goroutine writes at every reply
// without synchronisation: go-zookeeper/zk#35). Many watches make that
// resend slow; a request queued while the connection was down then had its
// reply read in the middle of it, and the race detector failed the test.
// The requests must still succeed once the connection is back.
func TestReconnectWithWatches(t *testing.T) {
	ctx := testCtx(t, 60*time.Second)
	p := newProxy(t, server.Addr())
	c := dialAddr(t, p.addr(), 4*time.Second)
	name := lockName(t)

	// Watches on nodes that do not exist: the connection resends them all.
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				if _, _, _, err := c.conn.ExistsW("/" + name + "-w" + strconv.Itoa(g*500+i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()

	for round := range 3 {
		p.refuse(true)
		p.cut()
		for c.conn.State() == zk.StateHasSession {
			if ctx.Err() != nil {
				t.Fatal("the connection was not dropped")
			}
			time.Sleep(time.Millisecond)
		}
		// Requests made while it is down.
		errs := make(chan error, 4)
		for i := range 4 {
			go func() {
				rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
				defer cancel()
				o, err := c.Mutex(name + "-other" + strconv.Itoa(round*4+i)).Acquire(rctx)
				if err == nil {
					err = o.Unlock(rctx)
				}
				errs <- err
			}()
		}
		time.Sleep(50 * time.Millisecond) // they are waiting (or queued)
		p.refuse(false)
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatalf("round %d: a request made while the connection was down: %v", round, err)
			}
		}
	}
}

// TestSettleMonotonic: a reconnection holds requests back for settle from
// when it was seen, measured on the monotonic clock (a step of the wall
// clock cannot be made here: it needs root and would move every other
// test's clock; time.Since reads the monotonic clock, and settle keeps no
// wall-clock reading).
func TestSettleMonotonic(t *testing.T) {
	c := dial(t, 3*time.Second)
	c.reconn.connection(zk.Event{Type: zk.EventSession, State: zk.StateHasSession})
	ctx := testCtx(t, 10*time.Second)
	start := time.Now()
	if err := c.settled(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < settle-10*time.Millisecond || d > settle+time.Second {
		t.Fatalf("a request after a reconnection waited %v, want about %v", d, settle)
	}
	if at := c.reconn.upAt.Load(); at != 0 {
		t.Fatalf("upAt %d after settle, want 0 (settled)", at)
	}
}
