package zklock

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
	"github.com/go-zookeeper/zk"
)

// Dial connects to the ZooKeeper servers (a comma-separated list of
// host:port), asking for cfg's TTL (default
// DefaultTTL), waits until the session is established or ctx is
// done, and returns a Client that owns the connection (Close closes it).
// The lease timing uses the smaller of the timeout asked for and the one
// the server negotiated. While the connection is down the client's
// requests fail at once as a lost connection (Acquire and Unlock retry
// them), and for 100 ms after it is back they wait: go-zookeeper resends
// its watches then, racing with itself (go-zookeeper/zk#35). Its errors
// read `dlock: dial zookeeper "<servers>": <reason>` and wrap
// dlock.ErrInvalidArgument for no server or a bad Config field
// (ErrInvalidDuration for a bad duration), or ctx's error if the session
// was not established in time.
func Dial(ctx context.Context, servers string, cfg ...Config) (*Client, error) {
	c, err := connect(ctx, servers, cfg)
	if err != nil {
		return nil, seam.WrapCall(fmt.Sprintf("dial zookeeper %q", servers), err)
	}
	return c, nil
}

// connect is Dial but for the naming of its errors.
func connect(ctx context.Context, servers string, cfg []Config) (*Client, error) {
	c, err := oneConfig(cfg)
	if err != nil {
		return nil, err
	}
	asked := cmp.Or(c.TTL, DefaultTTL)
	var addrs []string
	for _, a := range strings.Split(servers, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: no server given", dlock.ErrInvalidArgument)
	}
	neg := &negotiated{ch: make(chan struct{})}
	back := newReconnects()
	// The connection's events are read by a callback on its own goroutine
	// (the channel, unread, drops them): a watch's event costs no wake-up
	// of a goroutine of ours.
	conn, _, err := zk.Connect(addrs, asked, zk.WithLogger(neg), zk.WithLogInfo(true), zk.WithEventCallback(back.connection))
	if err != nil {
		return nil, err
	}
	select {
	case <-neg.ch:
	case <-ctx.Done():
		conn.Close()
		return nil, fmt.Errorf("%w (no session established)", ctx.Err())
	}
	// The timeout asked for bounds the one used: the server never grants a
	// session more than it was asked unless the request was below its
	// minimum, and then the shorter reading is the safe one.
	c.TTL = min(neg.timeout(), asked)
	back.upAt.Store(0) // the first connection: nothing to wait for (see settle)
	c.reconn = back
	cl := newClient(conn, c)
	cl.owned = true
	return cl, nil
}

// negotiated is the connection's logger: it learns the session timeout the
// server granted from the client's "authenticated" message and discards
// the rest (go-zookeeper logs reconnections at Info).
type negotiated struct {
	once sync.Once
	ch   chan struct{}
	mu   sync.Mutex
	ms   int32
}

func (n *negotiated) Printf(format string, args ...any) {
	if !strings.HasPrefix(format, "authenticated:") || len(args) < 2 {
		return
	}
	ms, ok := args[1].(int32)
	if !ok {
		return
	}
	n.mu.Lock()
	if n.ms == 0 || ms < n.ms {
		n.ms = ms
	}
	n.mu.Unlock()
	n.once.Do(func() { close(n.ch) })
}

func (n *negotiated) timeout() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return time.Duration(n.ms) * time.Millisecond
}
