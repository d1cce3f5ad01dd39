package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// grantOps drives one holder key: the dlock.GrantOps of a grant. Every
// write is conditional on the key's create revision, so nothing it sends,
// retried or late, touches a later acquisition of the lock.
type grantOps struct {
	c   *Client
	key string
	rev int64    // the key's create revision: the fencing token
	rec *reentry // a reentrant hold's count of Leases; nil otherwise

	mu       sync.Mutex
	sess     *session         // the session the key is attached to; nil for a lease of its own
	lease    clientv3.LeaseID // the lease the key is attached to
	leaseTTL time.Duration    // a lease of its own: its TTL as granted
}

func (o *grantOps) session() *session {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sess
}

func (o *grantOps) owned() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(o.key), "=", o.rev)
}

// Release deletes the key if it is still this grant's (a reentrant hold:
// once its last Lease is released). A release that fails is retried in the
// background while the key's lease lives, so a lock is never left held by a
// live session after its Unlock.
func (o *grantOps) Release(ctx context.Context) (dlock.Released, error) {
	if o.rec != nil && !o.rec.release() {
		return dlock.ReleasedStillHeld, nil
	}
	resp, err := o.c.cli.Txn(ctx).If(o.owned()).Then(clientv3.OpDelete(o.key)).Commit()
	if err != nil {
		o.c.deleteLater(o.key, o.rev, o.session())
		return dlock.ReleasedNotOurs, err
	}
	if !resp.Succeeded {
		return dlock.ReleasedNotOurs, nil
	}
	return dlock.ReleasedFree, nil
}

// Verify reports whether the key still exists with this grant's create
// revision (a linearizable read).
func (o *grantOps) Verify(ctx context.Context) (bool, error) {
	resp, err := o.c.cli.Txn(ctx).If(o.owned()).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// Extend makes etcd keep the key for at least ttl from now. A key on the
// session: one keepalive (ttl may not exceed the session's TTL: the session
// renews it). A key on a lease of its own: a keepalive of that lease when
// ttl fits in its TTL, else the key moves to a new lease of ttl and the old
// lease is revoked before Extend returns (if etcd cannot be reached for the
// revoke, it is retried in the background; the old lease holds nothing any
// more either way, and expires by itself at its TTL).
func (o *grantOps) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	o.mu.Lock()
	s, lease, leaseTTL := o.sess, o.lease, o.leaseTTL
	o.mu.Unlock()
	if s != nil {
		if ttl > s.ttl {
			return false, fmt.Errorf("%w: %v is longer than the session TTL %v (a lock without LeaseTime is kept by its session)", dlock.ErrInvalidDuration, ttl, s.ttl)
		}
		sent := time.Now()
		if _, err := o.c.cli.KeepAliveOnce(ctx, lease); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				o.c.endSession(s, dlock.LostExpired, false)
				return false, nil
			}
			return false, err
		}
		s.confirm(sent)
		return o.Verify(ctx)
	}
	if ttl <= leaseTTL {
		if _, err := o.c.cli.KeepAliveOnce(ctx, lease); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return false, nil
			}
			return false, err
		}
		return o.Verify(ctx)
	}
	lr, err := o.c.cli.Grant(ctx, seconds(ttl))
	if err != nil {
		return false, err
	}
	resp, err := o.c.cli.Txn(ctx).If(o.owned()).Then(clientv3.OpPut(o.key, "", clientv3.WithIgnoreValue(), clientv3.WithLease(lr.ID))).Commit()
	if err != nil || !resp.Succeeded {
		o.c.revokeLater(lr.ID)
		return false, err
	}
	o.mu.Lock()
	o.lease, o.leaseTTL = lr.ID, time.Duration(lr.TTL)*time.Second
	o.mu.Unlock()
	if _, err := o.c.cli.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		o.c.revokeLater(lease)
	}
	return true, nil
}

// deleteLater deletes key in the background (if its create revision is
// rev; rev 0: whatever it is — a key of ours whose revision is unknown)
// until that succeeds, the session s it is attached to ends (etcd removes
// the key then), or the Client is closed.
func (c *Client) deleteLater(key string, rev int64, s *session) {
	c.background(func(ctx context.Context) {
		var done <-chan struct{}
		if s != nil {
			done = s.done
		}
		for {
			cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", rev)
			if rev == 0 {
				cmp = clientv3.Compare(clientv3.CreateRevision(key), ">", 0)
			}
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := c.cli.Txn(dctx).If(cmp).Then(clientv3.OpDelete(key)).Commit()
			cancel()
			if err == nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
}

// revokeLater revokes a lease nothing uses any more, in the background
// (best effort: it expires on its own).
func (c *Client) revokeLater(id clientv3.LeaseID) {
	c.background(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, _ = c.cli.Revoke(ctx, id)
	})
}

// nopOps are the operations of a re-entry that did not join its hold (see
// reentry.join): there is nothing in etcd to release, extend or verify.
type nopOps struct{}

func (nopOps) Release(context.Context) (dlock.Released, error)     { return dlock.ReleasedNotOurs, nil }
func (nopOps) Extend(context.Context, time.Duration) (bool, error) { return false, nil }
func (nopOps) Verify(context.Context) (bool, error)                { return false, nil }
