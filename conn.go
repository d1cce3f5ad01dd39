package dlock

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// conn is what a lock's calls need of their Client: the go-redis client, the
// script runner and the batcher its calls go through, the key prefix, its
// subscriber (whose id names this Client's wake channel), and the script
// arguments every lock of the Client passes, boxed once. A Client embeds
// it; an attempt and the operations of its grant hold it.
type conn struct {
	rdb     redis.UniversalClient
	prefix  string
	scripts *scripter // runs script calls: FCALL, or EVALSHA
	calls   *batcher  // the script calls of concurrent callers, pipelined
	sub     *subscriber

	argClient, argCheck any
	argQueueSpec        any    // a Mutex's queue argument at the default timeout
	argLease, argQueue  any    // the default lease and queue timeout in ms
	leaseMs, queueMs    int64  // their values
	metaHead, metaTail  string // holder metadata around the acquired-at ms
}

// holderMeta is the metadata stored with a grant: host|pid|acquired-at-ms|label.
func (c *conn) holderMeta(now time.Time) string {
	return string(c.appendMeta(nil, now))
}

// appendMeta appends the holder metadata of a grant made now to b.
func (c *conn) appendMeta(b []byte, now time.Time) []byte {
	b = append(b, c.metaHead...)
	b = strconv.AppendInt(b, now.UnixMilli(), 10)
	return append(b, c.metaTail...)
}

// call runs sc, pipelined with the calls that other callers of c make at
// the same time (see batcher), and returns its reply; if ctx ends before
// the call is sent, it is not sent and ctx's error is returned. A call
// already sent is waited for, as a go-redis call is: go-redis's timeouts
// bound it.
func (c *conn) call(ctx context.Context, sc scriptCall) *redis.Cmd {
	cmd, _, err := c.calls.do(ctx, sc, true, false)
	if err != nil {
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(err)
	}
	return cmd
}

// callInt is call for a script whose reply is an integer.
func (c *conn) callInt(ctx context.Context, sc scriptCall) (int64, error) {
	return c.calls.doInt(ctx, sc)
}

// callSettled is callInt for a release or an extension on a Redis Cluster
// whose slot may be moving: a reply that says the script did not run (a slot
// being resharded, a redirect go-redis gave up following, an electing
// cluster: clusterPassing) sends it again every clusterRetry, so a resend
// never applies it twice. It stops at ctx's end, and within unlockTimeout
// when ctx has no deadline, returning the last error.
func (c *conn) callSettled(ctx context.Context, sc scriptCall) (int64, error) {
	n, err := c.callInt(ctx, sc)
	if err == nil || !clusterPassing(err) {
		return n, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, unlockTimeout)
		defer cancel()
	}
	t := time.NewTimer(clusterRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return n, err
		case <-t.C:
		}
		if n, err = c.callInt(ctx, sc); err == nil || !clusterPassing(err) {
			return n, err
		}
		t.Reset(clusterRetry)
	}
}

// ttlArg is a renewal's or extension's TTL in ms as a script argument.
func (c *conn) ttlArg(ttl time.Duration) any {
	if n := ms(ttl); n != c.leaseMs {
		return n
	}
	return c.argLease
}
