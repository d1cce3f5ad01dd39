package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/go-zookeeper/zk"
)

// Release gives one acquisition up: a reentrant count goes down, and the
// last release deletes the node. ReleasedNotOurs: the node was gone (its
// session ended, or someone deleted it).
func (n *node) Release(ctx context.Context) (dlock.Released, error) {
	n.mu.Lock()
	if n.count > 1 {
		n.count--
		n.mu.Unlock()
		return dlock.ReleasedStillHeld, nil
	}
	n.count = 0
	wasGone := n.end()
	if n.leaseEnd != nil {
		n.leaseEnd.Stop()
	}
	n.mu.Unlock()
	n.c.forget(n)
	if wasGone && n.sid != n.c.conn.SessionID() {
		return dlock.ReleasedNotOurs, nil
	}
	err := n.delete(ctx)
	switch {
	case err == nil:
		if wasGone {
			return dlock.ReleasedNotOurs, nil
		}
		return dlock.ReleasedFree, nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
		return dlock.ReleasedNotOurs, nil
	}
	return 0, err
}

// delete deletes the node if it is still this session's, retrying while
// the connection is down. If ctx ends first the delete goes on in the
// background (a node left behind would block the queue for as long as the
// session lives).
func (n *node) delete(ctx context.Context) error {
	for tried := false; ; tried = true {
		if n.c.conn.SessionID() != n.sid {
			return zk.ErrSessionExpired
		}
		_, err := call(ctx, n.c, func() (struct{}, error) {
			return struct{}{}, n.c.conn.Delete(n.path, -1)
		})
		switch {
		case tried && errors.Is(err, zk.ErrNoNode):
			// An earlier try whose reply was lost deleted it. (Nobody else
			// deletes another session's node but an operator, and the node
			// was ours when that try was sent.)
			return nil
		case errors.Is(err, errClosed): // the client closes: finish the delete
			return n.c.deletePath(n.path, n.sid)
		case ctx.Err() != nil:
			go n.c.deletePath(n.path, n.sid)
			return err
		case !retryable(err):
			return err
		}
		if sleep(ctx, n.c, 50*time.Millisecond) != nil {
			go n.c.deletePath(n.path, n.sid)
			return err
		}
	}
}

// Extend confirms the node is still ours; a ZooKeeper lock lasts as long as
// its session, so a lease can be extended by at most the session timeout
// (a fixed lease's end moves to now + ttl).
func (n *node) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	if ttl > n.c.timeout {
		return false, fmt.Errorf("%w: zklock: %v is past the session timeout %v (a lock lives as long as its session)",
			dlock.ErrInvalidDuration, ttl, n.c.timeout)
	}
	sent := time.Now()
	ok, err := n.Verify(ctx)
	if ok && err == nil {
		n.mu.Lock()
		if n.leaseEnd != nil {
			n.leaseEnd.Reset(time.Until(sent.Add(ttl - dlock.Drift(ttl))))
		}
		n.mu.Unlock()
	}
	return ok, err
}

// Verify reports whether the node still exists in this session with the
// czxid it was granted with.
func (n *node) Verify(ctx context.Context) (bool, error) {
	if n.c.conn.SessionID() != n.sid {
		return false, nil
	}
	st, err := call(ctx, n.c, func() (*zk.Stat, error) {
		ok, st, err := n.c.conn.Exists(n.path)
		if err == nil && !ok {
			st = nil
		}
		return st, err
	})
	if err != nil {
		if errors.Is(err, errClosed) {
			err = dlock.ErrClosed
		}
		return false, err
	}
	return st != nil && st.Czxid == n.czxid && st.EphemeralOwner == n.sid && n.c.conn.SessionID() == n.sid, nil
}
