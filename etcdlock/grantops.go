package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// grantOps drives the holder keys of one grant: its seam.GrantOps. Every
// write is conditional on the keys' create revision, so nothing it sends,
// retried or late, touches a later acquisition of the lock.
type grantOps struct {
	c    *Client
	keys []string // the holder's keys: one, or a MultiLock's one per name
	rev  int64    // their create revision: the fencing token
	hold string   // the hold's Grant.Key (a reentrant shape's), "" for the others
	slot int      // the keys' slot, given back by the first release once they are gone
	// lockDelay is the acquisition's LockDelay (< 0: not given; 0: the
	// keys have no marks), for the marks' value when the keys move to a
	// lease of their own.
	lockDelay time.Duration

	released atomic.Bool // a release was sent

	mu       sync.Mutex
	sess     *session         // the session the keys are attached to; nil for a lease of their own
	lease    clientv3.LeaseID // the lease the keys are attached to
	leaseTTL time.Duration    // a lease of their own: its TTL as granted
}

func (o *grantOps) session() *session {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.sess
}

// owned holds while every key exists with the grant's create revision.
func (o *grantOps) owned() []clientv3.Cmp {
	cmps := make([]clientv3.Cmp, len(o.keys))
	for i, k := range o.keys {
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(k), "=", o.rev)
	}
	return cmps
}

// Release deletes the keys of this grant. It reports ReleasedNotOurs if
// any key was gone (the lock was lost before the release).
//
// The first release deletes the keys by name: while the grant keeps their
// slot, no other key of that name can exist (only this Client writes them,
// and it reuses a name only once its keys are known to be gone), so a key
// deleted is this grant's. If etcd does not answer, the keys are deleted
// in the background, conditionally on their create revision, and the slot
// is retired (never reused by this Client): a delete that etcd applies
// late finds nobody's key. A release asked for again (a retried Unlock) is
// conditional on the create revision, so it never deletes a later
// acquisition that reused the name. A release that fails is retried in the
// background while the keys' lease lives, so a lock is never left held by
// a live session after its Unlock.
func (o *grantOps) Release(ctx context.Context) (seam.Released, error) {
	ctx = untimed(ctx)
	var ok bool
	var err error
	if o.released.CompareAndSwap(false, true) {
		ok, err = o.c.deleteNamed(ctx, o.keys)
		if err != nil {
			o.c.deleteLater(o.keys, o.rev, -1)
		} else {
			o.c.slots.give(o.slot)
		}
	} else {
		ok, err = o.c.deleteOwned(ctx, o.keys, o.rev)
	}
	switch {
	case err != nil:
		return seam.ReleasedNotOurs, err
	case !ok:
		return seam.ReleasedNotOurs, nil
	}
	return seam.ReleasedFree, nil
}

// deleteNamed deletes keys and their marks by name, in one request; it
// reports whether every key existed.
func (c *Client) deleteNamed(ctx context.Context, keys []string) (bool, error) {
	ops := make([]clientv3.Op, 0, 2*len(keys))
	for _, k := range keys {
		ops = append(ops, clientv3.OpDelete(k))
	}
	for _, k := range keys {
		ops = append(ops, clientv3.OpDelete(c.markOf(k)))
	}
	resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	for _, r := range resp.Responses[:len(keys)] {
		if r.GetResponseDeleteRange().GetDeleted() != 1 {
			return false, nil
		}
	}
	return true, nil
}

// Verify reports whether every key still exists with this grant's create
// revision (a linearizable read).
func (o *grantOps) Verify(ctx context.Context) (bool, error) {
	ctx = untimed(ctx)
	resp, err := o.c.cli.Txn(ctx).If(o.owned()...).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// Extend makes etcd keep the keys for at least ttl from now. Keys on the
// session: one keepalive (ttl may not exceed what the session keeps past a
// keepalive, its TTL less the election margin of margin.go: the session
// renews them). Keys on a lease of their own: a keepalive of that lease
// when ttl fits in its TTL less that margin, else the keys move to a new
// lease of ttl and
// the old lease is revoked before Extend returns (if etcd cannot be reached
// for the revoke, it is retried in the background; the old lease holds
// nothing any more either way, and expires by itself at its TTL).
func (o *grantOps) Extend(ctx context.Context, ttl time.Duration) (bool, error) {
	ctx = untimed(ctx)
	o.mu.Lock()
	s, lease, leaseTTL := o.sess, o.lease, o.leaseTTL
	o.mu.Unlock()
	if s != nil {
		if ttl > s.keep {
			return false, fmt.Errorf("%w: %v is longer than the session keeps a lock past a keepalive, %v (its TTL %v less %v an isolated leader can outlast the majority by; a lock without LeaseTime is kept by its session)",
				dlock.ErrInvalidDuration, ttl, s.keep, s.ttl, s.ttl-s.keep)
		}
		sent := time.Now()
		if _, err := o.c.cli.KeepAliveOnce(ctx, lease); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				o.c.endSession(s, observe.LostExpired, false)
				return false, nil
			}
			return false, err
		}
		s.confirm(sent)
		return o.Verify(ctx)
	}
	if ttl <= leaseTTL-o.c.margin() {
		if _, err := o.c.cli.KeepAliveOnce(ctx, lease); err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return false, nil
			}
			return false, err
		}
		return o.Verify(ctx)
	}
	ok, err := o.ownLease(ctx, ttl)
	if err != nil || !ok {
		return false, err
	}
	if _, err := o.c.cli.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		o.c.revokeLater(lease)
	}
	return true, nil
}

// ownLease moves the keys to a new lease of their own for d (LeaseTime):
// nothing renews it. Their marks take the lease's TTL as their delay
// (lockdelay.go). false: a key was gone (the new lease is revoked).
func (o *grantOps) ownLease(ctx context.Context, d time.Duration) (bool, error) {
	lr, err := o.c.cli.Grant(ctx, seconds(d))
	if err != nil {
		return false, err
	}
	puts := make([]clientv3.Op, len(o.keys), 2*len(o.keys))
	for i, k := range o.keys {
		puts[i] = clientv3.OpPut(k, "", clientv3.WithIgnoreValue(), clientv3.WithLease(lr.ID))
	}
	puts = append(puts, o.c.markPuts(o.keys, markValue(o.lockDelay, time.Duration(lr.TTL)*time.Second))...)
	resp, err := o.c.cli.Txn(ctx).If(o.owned()...).Then(puts...).Commit()
	if err != nil || !resp.Succeeded {
		o.c.revokeLater(lr.ID)
		return false, err
	}
	o.mu.Lock()
	o.sess, o.lease, o.leaseTTL = nil, lr.ID, time.Duration(lr.TTL)*time.Second
	o.mu.Unlock()
	return true, nil
}

// deleteLater deletes keys and their marks in the background (each if its
// create revision is rev; rev 0: whatever it is — keys of ours whose
// revision is unknown) until that succeeds or the Client is closed (a
// mark outlives the session the keys are attached to); then their slot
// (if >= 0) can be used again.
func (c *Client) deleteLater(keys []string, rev int64, slot int) {
	c.background(func(ctx context.Context) {
		for {
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := c.deleteOwned(dctx, keys, rev)
			cancel()
			if err == nil {
				if slot >= 0 {
					c.slots.give(slot)
				}
				return
			}
			if !retry(ctx) {
				return
			}
		}
	})
}

// Told deletes the marks of the keys (lockdelay.go): the holder was told
// it lost them, so nobody need wait for it any more.
func (o *grantOps) Told() { o.c.unmark(o.keys, o.rev) }

// revokeLater revokes a lease nothing uses any more, in the background
// (best effort: it expires on its own).
func (c *Client) revokeLater(id clientv3.LeaseID) {
	c.background(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, _ = c.cli.Revoke(ctx, id)
	})
}
