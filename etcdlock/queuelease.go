package etcdlock

import (
	"context"
	"errors"
	"time"

	"github.com/dlockgo/dlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// QueueTimeout on etcd. A waiter's keys are attached to the Client's
// session, so a waiter that goes silent (killed, paused, cut off) holds its
// place until etcd expires the session: up to the session TTL. With
// dlock.QueueTimeout(d) shorter than the TTL, a waiter that has to wait
// moves its keys (same keys, same create revision: its place in the queue
// does not change) to a lease of their own of d, which it keeps alive
// every d/3 while it waits; once granted, it moves them back to the
// session (or to the lease of LeaseTime) before Acquire returns, and
// revokes the short lease. A silent waiter's keys so vanish when etcd
// expires the short lease, at most d (plus etcd's expiry check, up to half
// a second) after its last keepalive: it stops blocking the waiters behind
// it, and finds its place gone (and queues again) if it comes back. A
// waiter that is granted right away never costs the extra lease. etcd
// counts TTLs in whole seconds, at least its minimum lease TTL (1.5
// election timeouts, 2 s with etcd's defaults): d is rounded up to that;
// a d that comes out at least as long as the session TTL changes nothing.

// queueLease is the lease of its own that an attempt's keys wait on.
type queueLease struct {
	id   clientv3.LeaseID
	ttl  time.Duration // as granted
	gone chan struct{} // closed when etcd says the lease is gone
	stop chan struct{} // closed when the attempt stops waiting on it
}

// waitOnOwnLease moves the attempt's keys (created at rev, holder id id)
// to a lease of the attempt's QueueTimeout, when that is shorter than the
// session's TTL, and keeps it alive until endOwnLease. gone: a key was
// gone already (the caller queues again).
func (a *attempt) waitOnOwnLease(s *session, keys []string, rev int64, id string) (gone bool, err error) {
	a.q = nil
	qt := a.o.QueueTimeout
	if qt <= 0 || seconds(qt) >= seconds(s.ttl) {
		return false, nil
	}
	lr, err := a.c.cli.Grant(a.wctx, seconds(qt))
	if err != nil {
		return false, err
	}
	ttl := time.Duration(lr.TTL) * time.Second
	if ttl >= s.ttl { // etcd raised it to its minimum: the session bounds the wait as well
		a.c.revokeLater(lr.ID)
		return false, nil
	}
	q := &queueLease{id: lr.ID, ttl: ttl, gone: make(chan struct{}), stop: make(chan struct{})}
	if !a.c.background(func(ctx context.Context) { q.keepAlive(ctx, a.c.cli) }) {
		return false, dlock.ErrClosed
	}
	a.q = q
	val := a.c.value(id, a.sh.permits, true, time.Now())
	ok, err := a.moveKeys(keys, rev, val, lr.ID, markQueued)
	if err != nil || !ok {
		a.endOwnLease()
		return !ok && err == nil, err
	}
	return false, nil
}

// moveKeys attaches keys (if each still has create revision rev) to lease
// with value val, and sets their marks (if the attempt has any) to mark,
// in one transaction; false if one was gone.
func (a *attempt) moveKeys(keys []string, rev int64, val string, lease clientv3.LeaseID, mark string) (bool, error) {
	cmps := make([]clientv3.Cmp, len(keys))
	puts := make([]clientv3.Op, len(keys), 2*len(keys))
	for i, k := range keys {
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(k), "=", rev)
		puts[i] = clientv3.OpPut(k, val, clientv3.WithLease(lease))
	}
	if a.o.LockDelay != 0 {
		puts = append(puts, a.c.markPuts(keys, mark)...)
	}
	resp, err := a.c.cli.Txn(a.wctx).If(cmps...).Then(puts...).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// toSession moves the granted keys of ops from the queue lease to the
// session s, with their metadata as of now and their marks' delay (a key
// waiting on a queue lease was never handed out: its mark said so until
// now); false if a key was gone.
func (a *attempt) toSession(s *session, ops *grantOps, id string) (bool, error) {
	return a.moveKeys(ops.keys, ops.rev, a.c.value(id, a.sh.permits, false, time.Now()), s.id, a.markValue(s.keep))
}

// endOwnLease stops keeping the attempt's queue lease alive and revokes it
// (in the background): its keys have moved to the session, or left.
func (a *attempt) endOwnLease() {
	if a.q == nil {
		return
	}
	close(a.q.stop)
	a.c.revokeLater(a.q.id)
	a.q = nil
}

// keepAlive renews q every third of its TTL until it is stopped, ctx ends
// (Close), or etcd says it is gone.
func (q *queueLease) keepAlive(ctx context.Context, cli *clientv3.Client) {
	t := time.NewTicker(q.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-q.stop:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		kctx, cancel := context.WithTimeout(ctx, q.ttl/3)
		_, err := cli.KeepAliveOnce(kctx, q.id)
		cancel()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			close(q.gone)
			return
		}
	}
}
