package etcdlock

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// shape is one kind of lock on one name (or, for a MultiLock, on several),
// as the acquire loop sees it.
type shape struct {
	kind string   // the dlock shape: mutex, lock, rw_read, rw_write, semaphore, multi
	name string   // the lock's name (a MultiLock's: its names joined)
	dirs []string // where the holder keys go: one key in each
	// hold is the Keeper key of the owner's hold of a reentrant shape
	// (reentrant acquisitions join it); nil: not reentrant.
	hold    func(owner string) string
	permits int          // a Semaphore's count, written into its keys' metadata
	check   func() error // the name and arguments; nil: seam.CheckName(name)
	// refuse, if set, runs ahead of queueing (after a re-entry found no
	// live hold): why the attempt may not queue, or nil.
	refuse func(a *attempt) error
	// down, if set, is the directory of a read hold its owner takes under
	// its own write hold (a downgrade): granted at once, not queued.
	down string
	// first are the reads of the acquiring transaction, after the puts (the
	// new keys are the newest in etcd then); later(rev) the reads that tell
	// what keys created at rev wait for now. They read keys only: etcd
	// serves those from its in-memory index, without reading any value.
	first []clientv3.Op
	later func(rev int64) []clientv3.Op
	// blocker reads first's or later's responses for keys created at rev:
	// the key to wait for ("" none: granted), or with prefix set a
	// directory whose deletions to wait for.
	blocker func(resps []*etcdserverpb.ResponseOp, rev int64) (key string, prefix bool)
	// guard, if set, is compared in the acquiring transaction beside the
	// keys' absence (a Semaphore's count in etcd), with orElse read when
	// the transaction fails; failed then reads orElse's responses: held
	// says the guard held (a key of ours existed), else err refuses the
	// attempt or nil queues it again.
	guard  func() (cmps []clientv3.Cmp, orElse []clientv3.Op)
	failed func(ctx context.Context, resps []*etcdserverpb.ResponseOp) (held bool, err error)
	// recheck, if set, reads later's responses before blocker does: an
	// error refuses a waiting attempt (a Semaphore's count changed).
	recheck func(resps []*etcdserverpb.ResponseOp) error
	// wake, if set, is a key whose every change ends a wait, beside the
	// deletions of what blocker names (a Semaphore's count).
	wake string
	// orphan, if set, reads the responses of the reads of the keys and of
	// the marks, once blocker found no key in the way: the orphan mark to
	// wait for (lockdelay.go). nil: blocker on the marks' responses.
	orphan func(keys, marks []*etcdserverpb.ResponseOp, rev int64) (mark string, prefix bool)
	// area is the lock's directories, where its orphans are looked for;
	// nil: dirs.
	area []string
}

// areas returns the directories of the lock's keys.
func (sh *shape) areas() []string {
	if sh.area != nil {
		return sh.area
	}
	return sh.dirs
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

// acquire is Acquire of every shape: check, re-enter, queue, wait, grant.
func (c *Client) acquire(ctx context.Context, sh shape, opts []dlock.Option) (l *dlock.Lease, err error) {
	call, err := c.keeper.Begin(ctx, seam.Request{Shape: sh.kind, Name: sh.name, Check: sh.check, Closed: c.isClosed}, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = call.End((*seam.Lease)(l), err) }()
	a := &attempt{c: c, sh: sh, o: call.Options, ctx: ctx, owner: seam.CarriedOwner(ctx), slot: -1}
	// Close ends the attempt, also in the middle of a request to an etcd
	// that does not answer; a try is bounded by the session TTL.
	wctx, cancel := call.WaitContext(c.ttl, c.bg)
	defer cancel()
	a.wctx = untimed(wctx)
	if sh.hold != nil {
		a.owner = seam.OwnerOf(ctx)
		a.hold = sh.hold(a.owner)
		joined, done, err := a.enter(call.Until())
		if err != nil {
			return nil, err
		}
		if joined != nil { // a re-entry: its LeaseTime and MaxHold apply to the hold
			if err := c.keeper.Reentered(ctx, (*seam.Lease)(joined), call.Options); err != nil {
				return nil, err
			}
			return joined, nil
		}
		defer done()
	}
	if sh.refuse != nil {
		if err := sh.refuse(a); err != nil {
			return nil, err
		}
	}
	sl, err := seam.Queue[*place](a.wctx, &call, a, c.isClosed, "etcd")
	return (*dlock.Lease)(sl), err
}

// attempt is one Acquire call: the seam.Line of its keys.
type attempt struct {
	c     *Client
	sh    shape
	owner string // the Lease's owner: OwnerOf(ctx) for a reentrant shape, else what ctx carries
	hold  string // the Keeper key of a reentrant shape's hold
	o     seam.Options
	ctx   context.Context    // the caller's: a grant is handed over under it
	wctx  context.Context    // ctx (as a tracer sees it) bounded by the wait: every etcd call runs under it
	own   clientv3.WatchChan // our own key's deletions, once watched
	ownAt <-chan time.Time   // when to start watching our own key
	q     *queueLease        // our keys' lease of their own while they wait (QueueTimeout)
	slot  int                // the slot of our keys' names while we queue; -1: none
	// downTried: Join tried the downgrade (shape.down) and found no write
	// hold of the owner's, or was granted it once.
	downTried bool
}

// place is an attempt's keys in line, one in each of its shape's
// directories.
type place struct {
	s    *session
	keys []string
	rev  int64  // their create revision
	id   string // the holder's id in their metadata
	at   int64  // the revision of the last look: a wait watches after it
	blk  string // what the last look found in the way ("": nothing)
	pfx  bool   // blk is a directory
	// looked: the joining transaction read the line; the first Look takes
	// its find.
	looked bool
	// watch is the context of the watch of our own key, set up (with the
	// queue lease) when the place first waits; stop ends it.
	watch context.Context
	stop  context.CancelFunc
}

var _ seam.Line[*place] = (*attempt)(nil)

// enter joins the owner's live hold of a reentrant shape (a re-entry etcd
// does not hear of), waiting first, until until (zero: as long as ctx
// allows), for any other acquisition of that hold by the same owner to end
// (two goroutines of one owner: the second joins what the first was
// granted, instead of queueing behind it). Otherwise it returns done, to
// call once this acquisition has ended (its grant handed to the Keeper, or
// failed).
func (a *attempt) enter(until time.Time) (*dlock.Lease, func(), error) {
	l, done, err := a.c.keeper.Enter(a.ctx, a.hold, a.owner, until, a.o.OnLost)
	return (*dlock.Lease)(l), done, err
}

// Join puts keys for this attempt in the lock's directories, with their
// marks (lockdelay.go), and reads what is in their way in the same
// transaction when the reads fit; or, the first time, for a downgrade,
// its key granted at once. ok is false when nothing stays (the session
// ended first, or a key or mark of that name was left over).
func (a *attempt) Join(ctx context.Context) (*place, bool, error) {
	if a.sh.down != "" && !a.downTried {
		p, err := a.downgrade(ctx)
		if err != nil {
			return nil, false, err // tried again, if transient: the owner may hold the write side still
		}
		a.downTried = true
		if p != nil {
			return p, true, nil
		}
	}
	s, err := a.c.session(ctx)
	if err != nil {
		return nil, false, err
	}
	n := len(a.sh.dirs)
	keys := make([]string, n)
	a.slot = a.c.slots.take()
	for i, dir := range a.sh.dirs {
		keys[i] = holderKey(dir, s, a.slot)
	}
	id := a.owner
	if a.hold == "" {
		id = seam.NewID()
	}
	val := a.c.value(id, a.sh.permits, false, time.Now())
	marks := a.c.markPuts(keys, a.markValue(s.keep))
	cmps := make([]clientv3.Cmp, 0, n+len(marks))
	ops := make([]clientv3.Op, n, n+len(marks)+2*len(a.sh.first))
	for i, k := range keys {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(k), "=", 0))
		ops[i] = clientv3.OpPut(k, val, clientv3.WithLease(s.id))
	}
	for _, m := range marks {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(string(m.KeyBytes())), "=", 0))
	}
	ops = append(ops, marks...)
	puts := len(ops)
	// The reads go with the puts when they fit in one transaction (a
	// MultiLock of many names reads in its first Look).
	read := puts+2*len(a.sh.first) <= maxTxnOps
	if read {
		ops = append(append(ops, a.sh.first...), a.c.markOps(a.sh.first)...)
	}
	var orElse []clientv3.Op
	if a.sh.guard != nil {
		gc, ge := a.sh.guard()
		cmps, orElse = append(cmps, gc...), ge
	}
	resp, err := a.c.cli.Txn(ctx).If(cmps...).Then(ops...).Else(orElse...).Commit()
	if err != nil {
		if a.c.sessionGone(s, err) { // nothing was written
			a.c.slots.give(a.slot)
			a.slot = -1
			return nil, false, nil
		}
		a.c.deleteLater(keys, 0, a.slot) // the puts may have been applied
		a.slot = -1
		return nil, false, err
	}
	if !resp.Succeeded {
		if a.sh.failed != nil {
			if held, err := a.sh.failed(ctx, resp.Responses); !held { // nothing was written
				a.c.slots.give(a.slot)
				a.slot = -1
				return nil, false, err
			}
		}
		// a key or mark of that name exists (a mark of ours not yet
		// deleted; a key never, by the slots' rule): leave the slot, queue
		// again
		a.slot = -1
		return nil, false, nil
	}
	p := &place{s: s, keys: keys, rev: resp.Header.Revision, id: id, at: resp.Header.Revision}
	if read {
		f := len(a.sh.first)
		p.blk, p.pfx = a.inTheWay(resp.Responses[puts:puts+f], resp.Responses[puts+f:], p.rev)
		p.looked = true
	}
	return p, true, nil
}

// Look reads what is in the way of p's keys (the join's find, the first
// time): Gone if a key of p's is gone (its session ended, or someone
// deleted it).
func (a *attempt) Look(ctx context.Context, p *place) (seam.Stand, error) {
	if !p.looked {
		n := len(p.keys)
		later := a.sh.later(p.rev)
		reads := make([]clientv3.Op, 0, n+2*len(later))
		for _, k := range p.keys {
			reads = append(reads, clientv3.OpGet(k, clientv3.WithKeysOnly()))
		}
		reads = append(append(reads, later...), a.c.markOps(later)...)
		resps, r, err := a.c.read(ctx, reads)
		if err != nil {
			return seam.Behind, err
		}
		for _, r := range resps[:n] {
			if len(r.GetResponseRange().GetKvs()) == 0 {
				return seam.Gone, nil
			}
		}
		if a.sh.recheck != nil {
			if err := a.sh.recheck(resps[n : n+len(later)]); err != nil {
				return seam.Behind, err
			}
		}
		p.at = r
		p.blk, p.pfx = a.inTheWay(resps[n:n+len(later)], resps[n+len(later):], p.rev)
	}
	p.looked = false
	if p.blk == "" {
		return seam.Granted, nil
	}
	return seam.Behind, nil
}

// Wait waits for a deletion of what the last look found in p's way. The
// first wait moves p's keys to a lease of their own (QueueTimeout); a
// wait that lasts watches p's own key too (etcd-io/etcd#19597): a watch
// on it, from the moment we queued, started once we have waited
// ownWatchAfter (a hand-off in a busy queue comes sooner, and a watch for
// every waiter costs the queue a fifth of its pace on etcd with fsync). A
// session etcd expired is seen by the keepalive too. (The keys of one
// attempt are deleted together, by a session or a queue lease that ends;
// one deleted from outside is found by the looks.)
func (a *attempt) Wait(ctx context.Context, p *place) (gone bool, err error) {
	if p.watch == nil {
		if gone, err := a.waitOnOwnLease(p.s, p.keys, p.rev, p.id); err != nil || gone {
			return gone, err
		}
		p.watch, p.stop = context.WithCancel(ctx)
		a.own, a.ownAt = nil, time.After(ownWatchAfter)
	}
	return a.waitFor(ctx, p)
}

// Grant turns p into the Lease (granted).
func (a *attempt) Grant(ctx context.Context, p *place) (*seam.Lease, error) {
	defer a.stopWaiting(p)
	l, err := a.granted(p.s, p.keys, p.rev, p.id)
	return (*seam.Lease)(l), err
}

// Leave deletes p's keys (those still ours); if etcd does not answer, the
// delete is retried in the background while the session lives
// (afterwards the keys are gone anyway).
func (a *attempt) Leave(p *place) {
	a.leave(p.keys, p.rev, p.s)
	a.stopWaiting(p)
}

// stopWaiting ends p's queue lease and the watch of its own key.
func (a *attempt) stopWaiting(p *place) {
	a.endOwnLease()
	if p.stop != nil {
		p.stop()
	}
}

// Transient reports an etcd error worth trying again within a wait: no
// leader, a timeout inside the cluster, an unreachable member, overload.
func (a *attempt) Transient(err error) bool { return transient(err) }

// inTheWay reads what is in the way of keys created at rev, from the
// responses of the shape's reads of the keys and of the marks: the key to
// wait for, or an orphan mark (timed, lockdelay.go), or a directory of
// either with prefix set; "" for none.
func (a *attempt) inTheWay(keys, marks []*etcdserverpb.ResponseOp, rev int64) (blk string, prefix bool) {
	if blk, prefix = a.sh.blocker(keys, rev); blk != "" {
		return blk, prefix
	}
	if blk, prefix = a.sh.orphanBlocker(keys, marks, rev); blk != "" {
		a.c.timeOrphans(a.wctx, a.sh.areas(), rev)
	}
	return blk, prefix
}

// markValue returns the value of this attempt's marks, for a hold kept by
// its session (keep: how long past a confirmed keepalive), "" for none.
func (a *attempt) markValue(keep time.Duration) string {
	if a.o.Lease > 0 {
		keep = a.o.Lease // the lease of its own it moves to (ownLease writes the granted TTL)
	}
	return markValue(a.o.LockDelay, keep)
}

// waitFor waits until what the last look found in p's way has a deletion
// after that look (false: look again), or p's own key or session is gone
// (gone).
func (a *attempt) waitFor(ctx context.Context, p *place) (gone bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(p.at + 1), clientv3.WithFilterPut()}
	if p.pfx {
		opts = append(opts, clientv3.WithPrefix())
	}
	wch := a.c.cli.Watch(ctx, p.blk, opts...)
	var wake clientv3.WatchChan
	if a.sh.wake != "" {
		wake = a.c.cli.Watch(ctx, a.sh.wake, clientv3.WithRev(p.at+1))
	}
	var qgone <-chan struct{}
	if a.q != nil {
		qgone = a.q.gone
	}
	for {
		select {
		case wr, ok := <-wch:
			// Events, a cancelled watch (compaction) or a closed channel:
			// look again.
			if !ok || wr.Err() != nil || wr.Canceled || len(wr.Events) > 0 {
				return false, ctx.Err()
			}
		case wr, ok := <-wake:
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
			a.own = a.c.cli.Watch(p.watch, p.keys[0], clientv3.WithRev(p.rev+1), clientv3.WithFilterPut())
		case <-qgone:
			return true, nil
		case <-p.s.done:
			return true, nil
		case <-a.c.bg.Done(): // Close
			return false, dlock.ErrClosed
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// leave deletes keys (those created at rev) and gives their slot back.
func (a *attempt) leave(keys []string, rev int64, s *session) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.wctx), 2*time.Second)
	defer cancel()
	if _, err := a.c.deleteOwned(ctx, keys, rev); err != nil {
		a.c.deleteLater(keys, rev, a.slot)
	} else if a.slot >= 0 {
		a.c.slots.give(a.slot)
	}
	a.slot = -1
}

// deleteOwned deletes each of keys that has create revision rev (rev 0:
// that exists), and each of their marks that has it, in one transaction;
// it reports whether every key had it.
func (c *Client) deleteOwned(ctx context.Context, keys []string, rev int64) (bool, error) {
	ops := make([]clientv3.Op, 0, 2*len(keys))
	del := func(k string) clientv3.Op {
		cmp := clientv3.Compare(clientv3.CreateRevision(k), "=", rev)
		if rev == 0 {
			cmp = clientv3.Compare(clientv3.CreateRevision(k), ">", 0)
		}
		return clientv3.OpTxn([]clientv3.Cmp{cmp}, []clientv3.Op{clientv3.OpDelete(k)}, nil)
	}
	for _, k := range keys {
		ops = append(ops, del(k))
	}
	for _, k := range keys {
		ops = append(ops, del(c.markOf(k)))
	}
	resp, err := c.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return false, err
	}
	for _, r := range resp.Responses[:len(keys)] {
		if !r.GetResponseTxn().GetSucceeded() {
			return false, nil
		}
	}
	return true, nil
}

// granted turns our keys, found first in line at a read after their grant,
// into a Lease. The session must still be alive on our clock: its key being
// there proves etcd had not revoked the lease yet, the clock that etcd
// cannot have expired it (etcd-io/etcd#11456). Otherwise the attempt
// queues again. Keys that waited on a lease of their own move to the
// session (or to the lease of LeaseTime) first.
func (a *attempt) granted(s *session, keys []string, rev int64, id string) (*dlock.Lease, error) {
	if !s.alive() {
		a.leave(keys, rev, s)
		return nil, nil
	}
	ops := &grantOps{c: a.c, keys: keys, rev: rev, hold: a.hold, slot: a.slot, lockDelay: a.o.LockDelay, sess: s, lease: s.id}
	g := seam.Grant[*grantOps]{
		Shape: a.sh.kind, Name: a.sh.name, Key: a.hold, Owner: a.owner, ID: keys[0], Token: rev,
		Sent: s.confirmed(), TTL: s.keep, Renewed: true, Session: s, MaxHold: a.o.MaxHold, Ops: ops, OnLost: a.o.OnLost,
	}
	switch {
	case a.o.Lease > 0:
		sent := time.Now()
		ok, err := ops.ownLease(a.wctx, a.o.Lease)
		if err != nil || !ok {
			a.leave(keys, rev, s)
			return nil, err
		}
		g.Sent, g.TTL, g.Renewed, g.Session = sent, a.o.Lease, false, a.c.ownLeases
	case a.q != nil:
		ok, err := a.toSession(s, ops, id)
		if err != nil || !ok {
			a.leave(keys, rev, s)
			if err != nil && a.c.sessionGone(s, err) {
				return nil, nil
			}
			return nil, err
		}
	}
	a.slot = -1 // the Keeper has the keys now: their release gives the slot back
	l, err := a.c.keeper.Lease(a.ctx, g)
	return (*dlock.Lease)(l), err
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
