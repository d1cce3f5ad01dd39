package etcdlock

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlockgo/dlock/seam"
)

// The lock-delay (dlock.LockDelay): after a hold ends without a release,
// nobody is granted the lock until its holder can no longer believe it
// holds it.
//
// Why. etcd can end a lease while its holder's keepalives are still
// confirmed: a paused leader that resumes revokes the leases whose expiry
// had passed on its stale clock (etcd v3.7.3, docs/RELIABILITY.md), and an
// operator can revoke a lease or delete a key. The key goes in one
// revision and leaves no trace; a waiter is woken by the delete and
// granted while the old holder, told nothing yet, goes on until its next
// keepalive (TTL/3) or, cut off, until its own deadline.
//
// Marks. Every key an attempt writes into a lock's directory has a mark:
// a key of the same name under <prefix>mark/ (markOf), without a lease,
// created in the same transaction (so with the same create revision). Its
// value is the hold's delay v in milliseconds (the session's keep, the
// LeaseTime's lease as granted, or LockDelay's d), or "q" while the key
// waits on a lease of its own (QueueTimeout). Whatever removes a key on
// purpose removes its mark in the same transaction: a release, a waiter
// leaving. A key that vanishes otherwise — its lease revoked or expired,
// deleted from outside — leaves its mark behind: an orphan.
//
// The rule. An attempt that finds nothing in its way among the keys also
// reads the marks with the same reads (markOps): a mark in its way whose
// key is gone is an orphan, and holds the attempt back until the mark is
// deleted. An orphan mark is deleted (1) by its holder's Client once the
// holder was told (seam.Told: every Lease of the hold already reads as
// lost), (2) at once if it is "q", or (3) by any Client that read it
// orphaned at S on its own clock, at S + v + Drift(v) (timeOrphan).
//
// Why it is sound. A holder's Lease is lost on its own monotonic clock at
// c + k − Drift(k) at the latest, where c is when it sent the last renewal
// (or the grant) that etcd confirmed and k its keep (≤ v; margin.go).
// Every confirmed renewal was applied before the lease ended, so before
// the key vanished, so before any read that saw the key gone: c < S. With
// clocks whose rates differ by less than the drift allowance, the holder
// is past its deadline by S + v + Drift(v), when (3) deletes the mark.
// A grant is decided on one read (revision R) of the keys and marks in its
// way: a key of a holder still in the store at R blocks it as today; a key
// gone by R without a release left its mark, which is there at R unless
// (1)–(3) deleted it, each after the holder was told or could no longer
// believe. A key whose mark is "q" was never handed out: a grant moves it
// to the session and writes its mark's delay in one transaction
// (toSession) before the Lease exists. Keys created after the attempt's
// own never stand in its way (arrival order), so nothing can vanish
// unseen between the read and the grant.
//
// Costs. A mark is one more put in the acquiring transaction and one more
// delete in the release's (the same raft entry); the reads of the marks
// run in the same requests as those of the keys (key names only, from
// etcd's in-memory index). Only a hold that ended without a release makes
// anyone wait: an Unlock hands the lock on at once. A holder whose process
// died delays the next grant by its v more than its lease (nobody is left
// to say it was told). Clients of versions without marks neither write nor
// read them: a fleet can roll.
//
// Orphans of a Client whose process died are deleted by the next attempt
// on the lock, or by any Client's sweep when it starts a session
// (sweepOrphans): marks of a session etcd no longer has.

// markDir is where the marks live under a Client's prefix.
const markDir = "mark/"

// markOf returns the mark of key (a key, a directory or a range end under
// the Client's prefix).
func (c *Client) markOf(key string) string { return c.prefix + markDir + key[len(c.prefix):] }

// markOps returns ops (gets) as reads of the marks: each on the mark of its
// key and range end.
func (c *Client) markOps(ops []clientv3.Op) []clientv3.Op {
	ms := make([]clientv3.Op, len(ops))
	for i, op := range ops {
		m := op
		m.WithKeyBytes([]byte(c.markOf(string(op.KeyBytes()))))
		if end := op.RangeBytes(); len(end) > 0 {
			m.WithRangeBytes([]byte(c.markOf(string(end))))
		}
		ms[i] = m
	}
	return ms
}

// markQueued is the value of the mark of a key waiting on a lease of its
// own: it was never handed out.
const markQueued = "q"

// markValue returns the value of the marks of a hold whose holder can
// believe it holds for keep past its last confirmed renewal: LockDelay's d
// if given, else keep; "" when the hold has no lock-delay (LockDelay(0)).
func markValue(lockDelay, keep time.Duration) string {
	switch {
	case lockDelay == 0:
		return ""
	case lockDelay > 0:
		keep = lockDelay
	}
	return strconv.FormatInt(keep.Milliseconds()+1, 10) // rounded up
}

// markPuts returns the puts of the marks of keys with value v (none when
// v is "").
func (c *Client) markPuts(keys []string, v string) []clientv3.Op {
	if v == "" {
		return nil
	}
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpPut(c.markOf(k), v)
	}
	return ops
}

// orphanBlocker returns, once the keys showed nothing in an attempt's way
// at rev (keys: the responses of its reads, marks: of the same reads of
// the marks), the orphan mark to wait for ("" none), or with prefix set a
// directory of marks whose deletions to wait for.
func (sh *shape) orphanBlocker(keys, marks []*etcdserverpb.ResponseOp, rev int64) (string, bool) {
	if sh.orphan != nil {
		return sh.orphan(keys, marks, rev)
	}
	// Every key in the way is gone: whatever mark the same reads find in
	// the way is an orphan.
	return sh.blocker(marks, rev)
}

// orphans are the orphan marks a Client is timing (timeOrphan), by mark
// and create revision.
type orphans struct {
	mu     sync.Mutex
	timing map[orphan]bool
}

type orphan struct {
	mark string
	rev  int64
}

// timeOrphans times every orphan mark in the way of keys created at rev in
// the lock's areas (directories): the marks older than rev whose key is
// gone. A read that fails times nothing (the attempt looks again).
func (c *Client) timeOrphans(ctx context.Context, areas []string, rev int64) {
	ops := make([]clientv3.Op, 0, 2*len(areas))
	for _, a := range areas {
		ops = append(ops, clientv3.OpGet(a, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithMaxCreateRev(rev-1)))
	}
	resps, _, err := c.read(ctx, append(ops, c.markOps(ops)...))
	if err != nil {
		return
	}
	live := make(map[string]int64)
	for _, r := range resps[:len(areas)] {
		for _, kv := range r.GetResponseRange().GetKvs() {
			live[c.markOf(string(kv.Key))] = kv.CreateRevision
		}
	}
	for _, r := range resps[len(areas):] {
		for _, kv := range r.GetResponseRange().GetKvs() {
			if live[string(kv.Key)] != kv.CreateRevision {
				c.timeOrphan(string(kv.Key), kv.CreateRevision)
			}
		}
	}
}

// timeOrphan deletes the mark created at rev, if its key is gone, once
// its delay has passed since this Client read it orphaned (at once if it
// is "q"), in the background; a mark already timed by this Client is left
// to that.
func (c *Client) timeOrphan(mark string, rev int64) {
	o := orphan{mark, rev}
	c.orphans.mu.Lock()
	if c.orphans.timing[o] {
		c.orphans.mu.Unlock()
		return
	}
	if c.orphans.timing == nil {
		c.orphans.timing = make(map[orphan]bool)
	}
	c.orphans.timing[o] = true
	c.orphans.mu.Unlock()
	done := func() {
		c.orphans.mu.Lock()
		delete(c.orphans.timing, o)
		c.orphans.mu.Unlock()
	}
	if !c.background(func(ctx context.Context) { defer done(); c.expireOrphan(ctx, o) }) {
		done()
	}
}

// expireOrphan is timeOrphan's work: read the mark and its key, wait the
// mark's delay from that read, delete the mark if its key is still gone.
func (c *Client) expireOrphan(ctx context.Context, o orphan) {
	key := c.prefix + o.mark[len(c.prefix)+len(markDir):]
	var v *mvccpb.KeyValue
	for {
		resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(key, clientv3.WithKeysOnly()), clientv3.OpGet(o.mark)).Commit()
		if err == nil {
			if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 && kvs[0].CreateRevision == o.rev {
				return // its key is there: not an orphan
			}
			if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 && kvs[0].CreateRevision == o.rev {
				v = kvs[0]
			}
			break
		}
		if !retry(ctx) {
			return
		}
	}
	if v == nil {
		return // deleted meanwhile
	}
	if s := string(v.Value); s != markQueued {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil || ms < 0 {
			ms = c.ttl.Milliseconds() // a value of another version: the longest a session keeps anything
		}
		d := time.Duration(ms) * time.Millisecond
		sleep(ctx, d+seam.Drift(d))
	}
	for ctx.Err() == nil {
		_, err := c.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(key), "!=", o.rev),
			clientv3.Compare(clientv3.CreateRevision(o.mark), "=", o.rev),
		).Then(clientv3.OpDelete(o.mark)).Commit()
		if err == nil || !retry(ctx) {
			return
		}
	}
}

// retry waits before a failed request is tried again; false once ctx has
// ended.
func retry(ctx context.Context) bool {
	sleep(ctx, 200*time.Millisecond)
	return ctx.Err() == nil
}

// unmark deletes the marks of keys created at rev, in the background until
// it succeeds or the Client is closed: their holder was told it lost them
// (grantOps.Told).
func (c *Client) unmark(keys []string, rev int64) {
	c.background(func(ctx context.Context) {
		ops := make([]clientv3.Op, len(keys))
		for i, k := range keys {
			m := c.markOf(k)
			ops[i] = clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(m), "=", rev)}, []clientv3.Op{clientv3.OpDelete(m)}, nil)
		}
		for {
			dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := c.cli.Txn(dctx).Then(ops...).Commit()
			cancel()
			if err == nil || !retry(ctx) {
				return
			}
		}
	})
}

// sweepOrphans times the marks, anywhere under the Client's prefix, of
// sessions etcd no longer has (their keys are gone unless they moved to a
// lease of their own, which expireOrphan checks): the orphans of a Client
// whose process died, on names nobody acquires again. It reads the marks'
// names a page at a time; a failed read ends it.
func (c *Client) sweepOrphans(ctx context.Context) {
	lr, err := c.cli.Leases(ctx)
	if err != nil {
		return
	}
	live := make(map[string]bool, len(lr.Leases))
	for _, l := range lr.Leases {
		live[strconv.FormatInt(int64(l.ID), 16)] = true
	}
	from, end := c.prefix+markDir, clientv3.GetPrefixRangeEnd(c.prefix+markDir)
	for {
		resp, err := c.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(sweepPage))
		if err != nil {
			return
		}
		for _, kv := range resp.Kvs {
			k := string(kv.Key)
			holder := k[strings.LastIndexByte(k, '/')+1:]
			if lease, _, ok := strings.Cut(holder, "-"); ok && !live[lease] {
				c.timeOrphan(k, kv.CreateRevision)
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// sweepPage is how many marks' names one read of a sweep returns.
const sweepPage = 1000

// read runs ops (gets) in as few transactions as etcd takes (maxTxnOps
// each): the responses in order, and the revision of the first.
func (c *Client) read(ctx context.Context, ops []clientv3.Op) ([]*etcdserverpb.ResponseOp, int64, error) {
	var resps []*etcdserverpb.ResponseOp
	var rev int64
	for i := 0; i < len(ops); i += maxTxnOps {
		resp, err := c.cli.Txn(ctx).Then(ops[i:min(i+maxTxnOps, len(ops))]...).Commit()
		if err != nil {
			return nil, 0, err
		}
		if i == 0 {
			rev = resp.Header.Revision
		}
		resps = append(resps, resp.Responses...)
	}
	return resps, rev, nil
}

// maxTxnOps is etcd's default limit of operations in one transaction
// (--max-txn-ops).
const maxTxnOps = 128
