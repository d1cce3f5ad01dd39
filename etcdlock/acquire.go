package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockgo/dlock"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// shape is one kind of lock on one name, as the acquire loop sees it.
type shape struct {
	kind      string // the dlock shape: mutex, lock, rw_read, rw_write, semaphore
	name      string
	dir       string // where the shape's holder keys go
	reentrant bool
	check     func() error // arguments beyond the name; nil: none
	// before runs ahead of queueing (after a re-entry found no live hold):
	// a grant, a refusal, or nil, nil to queue. nil: nothing.
	before func(a *attempt) (*dlock.Lease, error)
	// first are the reads of the acquiring transaction, after the put (the
	// new key is the newest in etcd then); later(rev) the reads that tell
	// what a key created at rev waits for now.
	first []clientv3.Op
	later func(rev int64) []clientv3.Op
	// blocker reads first's or later's responses for a key created at rev:
	// the key to wait for ("" none: granted), or with prefix set a
	// directory whose deletions to wait for.
	blocker func(resps []*etcdserverpb.ResponseOp, rev int64) (key string, prefix bool)
}

// ahead returns the newest of kvs created before rev ("" none).
func ahead(r *etcdserverpb.ResponseOp, rev int64) string {
	for _, kv := range r.GetResponseRange().GetKvs() {
		if kv.CreateRevision < rev {
			return string(kv.Key)
		}
	}
	return ""
}

// ownWatchAfter is how long a waiter waits before it watches its own key.
const ownWatchAfter = 500 * time.Millisecond

// errRefused: a Wait(0) try found the lock held.
var errRefused = errors.New("refused")

// acquire is Acquire of every shape: check, re-enter, queue, wait, grant.
func (c *Client) acquire(ctx context.Context, sh shape, opts []dlock.Option) (l *dlock.Lease, err error) {
	start := time.Now()
	defer func() { c.keeper.Acquired(sh.kind, sh.name, start, err) }()
	if err := dlock.CheckName(sh.name); err != nil {
		return nil, wrap("acquire", sh.name, err)
	}
	if sh.check != nil {
		if err := sh.check(); err != nil {
			return nil, wrap("acquire", sh.name, err)
		}
	}
	o, err := dlock.ParseOptions(opts)
	if err != nil {
		return nil, wrap("acquire", sh.name, err)
	}
	if c.isClosed() {
		return nil, wrap("acquire", sh.name, dlock.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, wrap("acquire", sh.name, err)
	}
	a := &attempt{c: c, sh: sh, owner: dlock.OwnerOf(ctx), o: o, ctx: ctx}
	var cancel context.CancelFunc
	switch {
	case o.Wait > 0:
		a.wctx, cancel = context.WithDeadline(ctx, start.Add(o.Wait))
	case o.Wait == 0: // one try, bounded against an etcd that does not answer
		a.wctx, cancel = context.WithTimeout(ctx, c.ttl)
	default:
		a.wctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	l, err = a.run()
	if err != nil {
		return nil, a.fail(err)
	}
	return l, nil
}

// attempt is one Acquire call.
type attempt struct {
	c     *Client
	sh    shape
	owner string
	o     dlock.Options
	ctx   context.Context    // the caller's: a grant is handed over under it
	wctx  context.Context    // ctx bounded by the wait: every etcd call runs under it
	own   clientv3.WatchChan // our own key's deletions, once watched
	ownAt <-chan time.Time   // when to start watching our own key
	last  error              // the last transient etcd error, for a refusal's detail
}

func (a *attempt) run() (*dlock.Lease, error) {
	if a.sh.reentrant {
		if r := a.c.lookup(a.sh.kind, a.sh.name, a.owner); r != nil {
			if l, err := a.c.join(a.ctx, r, a.sh.kind, a.sh.name, a.owner, a.o.OnLost); l != nil || err != nil {
				return l, err
			}
		}
	}
	if a.sh.before != nil {
		if l, err := a.sh.before(a); l != nil || err != nil {
			return l, err
		}
	}
	for again := 0; ; {
		l, err := a.queue()
		switch {
		case l != nil:
			return l, nil
		case err == nil && (a.o.Wait != 0 || again < 3):
			// Our place went with our session (or was deleted): queue
			// again, behind everyone; a try tries on a new session.
			again++
			continue
		case err == nil:
			return nil, errRefused
		case transient(err) && a.o.Wait != 0 && a.wctx.Err() == nil:
			a.last = err
			sleep(a.wctx, 100*time.Millisecond)
		default:
			return nil, err
		}
	}
}

// fail turns what ended an attempt into Acquire's error.
func (a *attempt) fail(err error) error {
	name := a.sh.name
	switch {
	case a.ctx.Err() != nil:
		return wrap("acquire", name, a.ctx.Err())
	case errors.Is(err, errRefused) || a.wctx.Err() != nil:
		cause := a.last
		if cause == nil && !errors.Is(err, errRefused) && !isCtxErr(err) {
			cause = err
		}
		if cause != nil {
			return wrap("acquire", name, fmt.Errorf("%w (etcd: %v)", dlock.ErrNotAcquired, cause))
		}
		return wrap("acquire", name, dlock.ErrNotAcquired)
	case errors.Is(err, dlock.ErrClosed):
		return wrap("acquire", name, dlock.ErrClosed)
	}
	return wrap("acquire", name, err)
}

// queue puts a key for this attempt in the lock's directory and waits
// until nothing it must wait for is left. It returns the grant, or nil, nil
// when the key went away while waiting (its session ended, or someone
// deleted it): the caller queues again, behind everyone.
func (a *attempt) queue() (*dlock.Lease, error) {
	s, err := a.c.session(a.wctx)
	if err != nil {
		return nil, err
	}
	key := holderKey(a.sh.dir, s.id)
	put := clientv3.OpPut(key, a.owner, clientv3.WithLease(s.id))
	resp, err := a.c.cli.Txn(a.wctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(append([]clientv3.Op{put}, a.sh.first...)...).Commit()
	if err != nil {
		if a.c.sessionGone(s, err) {
			return nil, nil
		}
		a.c.deleteLater(key, 0, s) // the put may have been applied
		return nil, err
	}
	rev, at := resp.Header.Revision, resp.Header.Revision
	blk, pfx := a.sh.blocker(resp.Responses[1:], rev)
	if blk == "" {
		return a.granted(s, key, rev)
	}
	if a.o.Wait == 0 {
		a.leave(key, rev, s)
		return nil, errRefused
	}
	wctx, cancel := context.WithCancel(a.wctx)
	defer cancel()
	// Our own key's deletion ends the wait (etcd-io/etcd#19597): a watch
	// on it, from the moment we queued, started once we have waited
	// ownWatchAfter (a hand-off in a busy queue comes sooner, and a watch
	// for every waiter costs the queue a fifth of its pace on etcd with
	// fsync). A session etcd expired is seen by the keepalive too.
	a.own, a.ownAt = nil, time.After(ownWatchAfter)
	startOwn := func() {
		a.own = a.c.cli.Watch(wctx, key, clientv3.WithRev(rev+1), clientv3.WithFilterPut())
	}
	for {
		if blk != "" {
			gone, err := a.waitFor(wctx, s, blk, pfx, at, startOwn)
			if err != nil {
				a.leave(key, rev, s)
				return nil, err
			}
			if gone {
				a.leave(key, rev, s)
				return nil, nil
			}
		}
		resp, err := a.c.cli.Txn(a.wctx).Then(append([]clientv3.Op{clientv3.OpGet(key, clientv3.WithKeysOnly())}, a.sh.later(rev)...)...).Commit()
		if err != nil {
			if transient(err) && a.wctx.Err() == nil {
				a.last = err
				blk = ""
				sleep(a.wctx, 100*time.Millisecond)
				continue
			}
			a.leave(key, rev, s)
			return nil, err
		}
		if len(resp.Responses[0].GetResponseRange().GetKvs()) == 0 {
			return nil, nil // our key is gone: queue again
		}
		at = resp.Header.Revision
		if blk, pfx = a.sh.blocker(resp.Responses[1:], rev); blk == "" {
			return a.granted(s, key, rev)
		}
	}
}

// waitFor waits until blk (a directory with pfx) has a deletion after
// revision at (true: look again), or our own key or session is gone (gone).
func (a *attempt) waitFor(ctx context.Context, s *session, blk string, pfx bool, at int64, startOwn func()) (gone bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(at + 1), clientv3.WithFilterPut()}
	if pfx {
		opts = append(opts, clientv3.WithPrefix())
	}
	wch := a.c.cli.Watch(ctx, blk, opts...)
	for {
		select {
		case wr, ok := <-wch:
			// Events, a cancelled watch (compaction) or a closed channel:
			// look again.
			if !ok || wr.Err() != nil || wr.Canceled || len(wr.Events) > 0 {
				return false, ctx.Err()
			}
		case wr, ok := <-a.own:
			if !ok || wr.Canceled {
				a.own = nil // the checks see our key gone
				continue
			}
			if len(wr.Events) > 0 {
				return true, nil
			}
		case <-a.ownAt:
			a.ownAt = nil
			startOwn()
		case <-s.done:
			return true, nil
		case <-a.c.bg.Done(): // Close
			return false, dlock.ErrClosed
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// leave deletes our key (if it is still ours) when we stop waiting; if etcd
// does not answer, the delete is retried in the background while the
// session lives (afterwards the key is gone anyway).
func (a *attempt) leave(key string, rev int64, s *session) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.ctx), 2*time.Second)
	defer cancel()
	_, err := a.c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		a.c.deleteLater(key, rev, s)
	}
}

// granted turns our key, found first in line at a read after its grant,
// into a Lease. The session must still be alive on our clock: its key being
// there proves etcd had not revoked the lease yet, the clock that etcd
// cannot have expired it (etcd-io/etcd#11456). Otherwise the attempt
// queues again.
func (a *attempt) granted(s *session, key string, rev int64) (*dlock.Lease, error) {
	if !s.alive() {
		a.leave(key, rev, s)
		return nil, nil
	}
	ops := &grantOps{c: a.c, key: key, rev: rev, sess: s, lease: s.id}
	g := dlock.Grant{
		Shape: a.sh.kind, Name: a.sh.name, Owner: a.owner, ID: key, Token: rev,
		Sent: s.confirmed(), TTL: s.ttl, Renewed: true, Ops: ops, OnLost: a.o.OnLost,
	}
	if a.o.Lease > 0 {
		sent := time.Now()
		ok, err := ops.ownLease(a.wctx, a.o.Lease)
		if err != nil || !ok {
			a.leave(key, rev, s)
			return nil, err
		}
		g.Sent, g.TTL, g.Renewed = sent, a.o.Lease, false
	}
	if !a.sh.reentrant {
		return a.c.keeper.Lease(a.ctx, g)
	}
	return a.register(g, ops)
}

// register hands out a reentrant grant and records it for re-entries. If
// another acquisition of the same owner was granted meanwhile (readers
// share), this one joins it and gives its own key back.
func (a *attempt) register(g dlock.Grant, ops *grantOps) (*dlock.Lease, error) {
	c := a.c
	c.reentMu.Lock()
	defer c.reentMu.Unlock()
	if r := c.lookup(a.sh.kind, a.sh.name, a.owner); r != nil {
		if l, err := c.join(a.ctx, r, a.sh.kind, a.sh.name, a.owner, a.o.OnLost); l != nil || err != nil {
			a.leave(ops.key, ops.rev, ops.session())
			return l, err
		}
	}
	r := &reentry{c: c, key: reentryKey(a.sh.kind, a.sh.name, a.owner), ops: ops, count: 1}
	ops.rec = r
	g.Key = r.key
	g.OnLost = r.onLost(a.o.OnLost)
	l, err := c.keeper.Lease(a.ctx, g)
	if err == nil {
		c.register(r)
	}
	return l, err
}

// ownLease moves the key of a fresh grant to a lease of its own for d
// (LeaseTime): nothing renews it. false: the key was gone.
func (o *grantOps) ownLease(ctx context.Context, d time.Duration) (bool, error) {
	lr, err := o.c.cli.Grant(ctx, seconds(d))
	if err != nil {
		return false, err
	}
	resp, err := o.c.cli.Txn(ctx).If(o.owned()).Then(clientv3.OpPut(o.key, "", clientv3.WithIgnoreValue(), clientv3.WithLease(lr.ID))).Commit()
	if err != nil || !resp.Succeeded {
		o.c.revokeLater(lr.ID)
		return false, err
	}
	o.mu.Lock()
	o.sess, o.lease, o.leaseTTL = nil, lr.ID, time.Duration(lr.TTL)*time.Second
	o.mu.Unlock()
	return true, nil
}

// transient reports an etcd error worth trying again within a wait: no
// leader, a timeout inside the cluster, an unreachable member, overload.
func transient(err error) bool {
	var code codes.Code
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if st, ok := status.FromError(err); ok {
		code = st.Code()
	} else {
		return false
	}
	return code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.ResourceExhausted || code == codes.Aborted
}
