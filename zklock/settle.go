package zklock

import (
	"context"
	"time"

	"github.com/go-zookeeper/zk"
)

// settle is how long after a reconnection the client waits before it
// sends a request. Right after reconnecting, go-zookeeper sends the watches
// it had again, reading a field (the last zxid seen) that its receiving
// goroutine writes, without synchronisation, at every reply
// (go-zookeeper/zk#35, unfixed in v1.0.4). A reply to a request that
// goes out in that instant (one queued while the connection was down goes
// out first) is what the race detector reports, in the client's tests and
// in its users' tests. So no request of the client's goes out while the
// connection is down, nor in the first settle after it is back; steady
// state costs two atomic loads per request. The caller's own requests on
// a connection given to New are not held back.
const settle = 100 * time.Millisecond

// epoch is the reference of the instants settle keeps: they are read as
// time.Since(epoch), on the monotonic clock, so a step of the wall clock
// (NTP, an operator) neither stalls requests nor lets them out early.
var epoch = time.Now()

// monotonic returns the time since epoch on the monotonic clock, in ns (at
// least 1: 0 and -1 are upAt's marks).
func monotonic() int64 { return max(int64(time.Since(epoch)), 1) }

// settled returns once a request may be sent on c's connection (see
// settle): at once while it has been up for settle, after the rest of
// settle if it came back less than that ago. While the connection is down
// it returns errNotConnected, which callers retry as a lost connection;
// when ctx ends first, ctx's error. Once the client is closed it does not
// wait: Close's own requests go out if the connection is up.
func (c *Client) settled(ctx context.Context) error {
	r := c.reconn
	for {
		if c.conn.State() != zk.StateHasSession {
			r.upAt.Store(-1)
			return errNotConnected
		}
		at := r.upAt.Load()
		switch {
		case at == 0:
			return nil
		case at == -1: // seen down, now up: it came back about now
			r.upAt.CompareAndSwap(-1, monotonic())
			continue
		}
		wait := settle - time.Duration(monotonic()-at)
		if wait <= 0 || c.closed() {
			r.upAt.CompareAndSwap(at, 0)
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.done:
			t.Stop()
			return nil
		case <-ctx.Done():
			t.Stop()
			if c.closed() {
				return nil
			}
			return ctx.Err()
		}
	}
}

// connection records a session event of Dial's connection: when it is
// back (guards watch again), and when it is down.
func (r *reconnects) connection(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		r.upAt.Store(monotonic())
		r.signal()
	case zk.StateDisconnected, zk.StateConnecting, zk.StateExpired:
		r.upAt.Store(-1)
	}
}
