package zklock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
	"github.com/go-zookeeper/zk"
)

// Release gives the hold up (the Keeper calls it for the last Lease of a
// reentrant hold): its nodes are deleted. ReleasedNotOurs: a node was gone
// (its session ended, or someone deleted it).
func (n *node) Release(ctx context.Context) (seam.Released, error) {
	n.mu.Lock()
	wasGone := n.end()
	n.mu.Unlock()
	n.c.forget(n)
	if wasGone && n.sid != n.c.conn.SessionID() {
		return seam.ReleasedNotOurs, nil
	}
	gone, err := n.delete(ctx)
	switch {
	case err == nil && (wasGone || gone):
		return seam.ReleasedNotOurs, nil
	case err == nil:
		return seam.ReleasedFree, nil
	case errors.Is(err, zk.ErrSessionExpired):
		return seam.ReleasedNotOurs, nil
	}
	return 0, err
}

// delete deletes n's nodes if they are still this session's; gone reports
// that one was not there any more.
func (n *node) delete(ctx context.Context) (gone bool, err error) {
	for _, p := range n.paths() {
		switch e := n.deleteOne(ctx, p); {
		case errors.Is(e, zk.ErrNoNode):
			gone = true
		case e != nil && err == nil:
			err = e
		}
	}
	return gone, err
}

// deleteOne deletes path, one of n's nodes, if it is still this session's,
// retrying while the connection is down. If ctx ends first the delete goes
// on in the background (a node left behind would block the queue for as
// long as the session lives).
func (n *node) deleteOne(ctx context.Context, path string) error {
	for tried := false; ; tried = true {
		if n.c.conn.SessionID() != n.sid {
			return zk.ErrSessionExpired
		}
		_, err := call(ctx, n.c, func() (struct{}, error) {
			return struct{}{}, n.c.conn.Delete(path, -1)
		})
		switch {
		case tried && errors.Is(err, zk.ErrNoNode):
			// An earlier try whose reply was lost deleted it. (Nobody else
			// deletes another session's node but an operator, and the node
			// was ours when that try was sent.)
			return nil
		case errors.Is(err, errClosed): // the client closes: finish the delete
			return n.c.deletePath(path, n.sid)
		case ctx.Err() != nil:
			go n.c.deletePath(path, n.sid)
			return err
		case !retryable(err):
			return err
		}
		if sleep(ctx, n.c, 50*time.Millisecond) != nil {
			go n.c.deletePath(path, n.sid)
			return err
		}
	}
}

// Extend confirms the nodes are still ours, after a sync (a server cut off
// from the quorum cannot answer it, so it cannot confirm a lease the
// quorum may have ended). A ZooKeeper lock lasts as long as its session,
// which surely lives firstSpan (5/12 of the session timeout, see
// liveness.go) past a request answered through the quorum: a lease can be
// extended by at most that (a fixed lease's end moves to now + ttl).
func (n *node) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	if most := firstSpan(n.c.timeout); ttl > most {
		return false, fmt.Errorf("%w: %v is past %v, as long as a ZooKeeper session surely lives past one request (5/12 of the session timeout %v)",
			dlock.ErrInvalidDuration, ttl, most, n.c.timeout)
	}
	sent := time.Now()
	if _, err := call(ctx, n.c, func() (string, error) { return n.c.conn.Sync("/") }); err != nil {
		if errors.Is(err, errClosed) {
			err = dlock.ErrClosed
		}
		return false, err
	}
	ok, err := n.Verify(ctx)
	if ok && err == nil {
		n.mu.Lock()
		if n.leaseEnd != nil && !n.gone {
			n.endsAt = seam.LeaseEnd(sent, ttl)
			n.leaseEnd.Reset(time.Until(n.endsAt))
		}
		n.mu.Unlock()
	}
	return ok, err
}

// lastAtLeast moves the end of a fixed lease longer than the first span
// (kept by the heartbeat, ended by a timer) to d from now, if it is
// sooner: a re-entry's LeaseTime (a shorter fixed lease is extended in
// ZooKeeper: Keeper.Reentered).
func (n *node) lastAtLeast(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e := seam.LeaseEnd(time.Now(), d); n.leaseEnd != nil && !n.gone && e.After(n.endsAt) {
		n.endsAt = e
		n.leaseEnd.Reset(time.Until(e))
	}
}

// Verify reports whether n's nodes still exist in this session with the
// czxid they were granted with.
func (n *node) Verify(ctx context.Context) (bool, error) {
	for _, p := range n.paths() {
		if n.c.conn.SessionID() != n.sid {
			return false, nil
		}
		st, err := call(ctx, n.c, func() (*zk.Stat, error) {
			ok, st, err := n.c.conn.Exists(p)
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
		if st == nil || st.Czxid != n.czxid || st.EphemeralOwner != n.sid {
			return false, nil
		}
	}
	return n.c.conn.SessionID() == n.sid, nil
}
