package zklock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
	"github.com/go-zookeeper/zk"
)

// Semaphore is a lock of up to a number of holders at once, granted in
// arrival order. It is a lock of its own, apart from the Mutex, Lock,
// RWLock and MultiLock of the same name. Waiters watch the semaphore's
// directory, so each release wakes every waiter (and so does a change of
// the count).
//
// The permit count lives in ZooKeeper, as on Redis: the first Acquire that
// finds none sets it to its Semaphore's count, and an Acquire whose
// Semaphore has another count fails with an error wrapping
// dlock.ErrInvalidArgument (the stored count in the message), making
// nothing; a waiter that finds the count changed while it waits fails the
// same way, unless the change was its own Semaphore's SetPermits.
// SetPermits changes the count for every user.
//
// The count is a persistent node <root>/permits/<name> whose one child is
// named for the count (<root>/permits/<name>/3; the parent's data says it
// too, for zkCli). The transaction that queues a permit's node checks that
// the child of its count exists, so a node is never queued under another
// count, at no extra request; a waiter reads the count again after every
// listing of the semaphore's directory and is granted a permit only if the
// count it read is still its own (see recheck). The count outlives the
// permits (delete the node to forget it; the next Acquire sets it again).
type Semaphore struct {
	c       *Client
	req     request
	permits *seam.Permits
}

// Semaphore returns the lock name as a semaphore of permits holders
// (permits < 1 makes Acquire fail with dlock.ErrInvalidArgument).
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	return &Semaphore{c: c, permits: seam.NewPermits(permits), req: request{shape: "semaphore", family: familySemaphore, name: name, kind: kindPermit}}
}

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.req.name }

// Acquire takes a permit; see Mutex.Acquire. It fails with an error
// wrapping dlock.ErrInvalidArgument if ZooKeeper keeps another count for
// the name.
func (s *Semaphore) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	r := s.req
	r.permits, r.sem = s.permits.Count(), s
	return s.c.acquire(ctx, &r, opts)
}

// SetPermits sets the semaphore's permit count in ZooKeeper to n (at least
// 1), for every user of its name, and makes this Semaphore count against
// n. Permits held beyond a lowered count stay held until they are
// released; waiters look again, as more permits may fit (a waiter whose
// Semaphore has another count than n fails with dlock.ErrInvalidArgument).
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	name := s.req.name
	fail := func(err error) error { return seam.Wrap("set permits", "semaphore", name, err) }
	if err := seam.CheckContext(ctx); err != nil {
		return fail(err)
	}
	if err := seam.CheckName(name); err != nil {
		return fail(err)
	}
	if n < 1 {
		return fail(fmt.Errorf("%w: %d permits (want at least 1)", dlock.ErrInvalidArgument, n))
	}
	if s.c.closed() {
		return fail(dlock.ErrClosed)
	}
	if err := s.permits.Set(n, func() error { return s.c.setPermits(ctx, name, n) }); err != nil {
		if errors.Is(err, errClosed) {
			err = dlock.ErrClosed
		}
		return seam.StoreErr(ctx, "set permits", "semaphore", name, err)
	}
	return nil
}

// errCheck: the transaction that queues a node found its check's node
// gone (nothing was made): ZooKeeper does not keep the permit count the
// permit was asked with, or the write node a downgrade reads under is no
// more.
var errCheck = errors.New("the node the transaction checks is gone")

// maxCountTries bounds the transactions that set a count, each undone by
// another one changing it at once.
const maxCountTries = 20

// wakeNode is the child a SetPermits creates and deletes in the
// semaphore's directory, in its transaction, to wake the waiters (it is
// no member: see parseMember).
const wakeNode = "permits"

// permitsPath returns the node of the permit count of the semaphore name.
func (c *Client) permitsPath(name string) string { return c.root + "/permits/" + escape(name) }

// countCheck returns the node whose existence says that ZooKeeper keeps
// r's count: for a permit, the child of the count node named for it; ""
// for the other shapes.
func (c *Client) countCheck(r *request) string {
	if r.kind != kindPermit {
		return ""
	}
	return c.permitsPath(r.name) + "/" + strconv.Itoa(r.permits)
}

// storedCount reads the children of a count node: the count, and ok
// false when there is none (no child, or the node is missing); raw is
// what is there (children joined by ",") for a refusal's message.
func storedCount(children []string) (n int, raw string, ok bool) {
	var counts []int
	for _, ch := range children {
		if k, err := strconv.Atoi(ch); err == nil && k > 0 {
			counts = append(counts, k)
		}
	}
	if len(counts) == 0 {
		return 0, "", false
	}
	slices.Sort(counts)
	if len(counts) == 1 {
		return counts[0], strconv.Itoa(counts[0]), true
	}
	raw = fmt.Sprint(counts) // set by hand: refuse every count
	return 0, raw, true
}

// readCount lists the count node of name: its children and its version.
func (c *Client) readCount(ctx context.Context, name string) ([]string, *zk.Stat, error) {
	type got struct {
		children []string
		st       *zk.Stat
	}
	g, err := call(ctx, c, func() (got, error) {
		ch, st, err := c.conn.Children(c.permitsPath(name))
		if err != nil {
			return got{}, err // go-zookeeper gives a zero Stat with an error
		}
		return got{ch, st}, nil
	})
	return g.children, g.st, err
}

// settle runs when the transaction that queues r's permit found that
// ZooKeeper does not keep r's count: it sets it if there is none (the
// count node and its child in one transaction, so two first users cannot
// both set theirs), takes the count on if r's Semaphore is setting it
// (SetPermits in flight), and otherwise refuses r. nil: queue again.
func (c *Client) settle(ctx context.Context, r *request) error {
	p := c.permitsPath(r.name)
	backoff := 20 * time.Millisecond
	for try := 1; ; try++ {
		children, st, err := c.readCount(ctx, r.name)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			n, raw, ok := storedCount(children)
			switch {
			case ok && n == r.permits: // set meanwhile: queue again
				return nil
			case ok && r.sem.permits.Accepts(n):
				r.permits = n
				return nil
			case ok:
				return seam.PermitsMismatch(raw, r.permits)
			}
			// None: set ours.
			want := strconv.Itoa(r.permits)
			var ops []any
			if st == nil {
				ops = append(ops, &zk.CreateRequest{Path: p, Data: []byte(want), Acl: c.acl})
			} else { // the node is there without a count (removed by hand)
				ops = append(ops, &zk.SetDataRequest{Path: p, Data: []byte(want), Version: st.Version})
			}
			ops = append(ops, &zk.CreateRequest{Path: p + "/" + want, Acl: c.acl})
			_, err = call(ctx, c, func() ([]zk.MultiResponse, error) { return c.conn.Multi(ops...) })
			switch {
			case err == nil:
				return nil
			case try >= maxCountTries:
				return fmt.Errorf("setting the permit count: %w", err)
			case errors.Is(err, zk.ErrNoNode) && st == nil: // no <root>/permits yet
				if err := c.makeDir(ctx, c.root+"/permits"); err != nil {
					return err
				}
				continue
			case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion): // set meanwhile: read it
				continue
			}
		}
		if !retryable(err) {
			return err
		}
		if err := sleep(ctx, c, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// recheck reads the count again for a waiting permit, after a listing of
// its directory: if the count is still r's, the listing's verdict stands
// (the nodes before it only go away, so at this read, later than the
// listing, at most as many are before it, under r's count). If the
// count changed, changed says r now counts against it (its Semaphore's
// SetPermits), or the error refuses r. A count removed by hand is taken
// as r's.
func (c *Client) recheck(ctx context.Context, r *request) (changed bool, err error) {
	ok, err := call(ctx, c, func() (bool, error) {
		ok, _, err := c.conn.Exists(c.countCheck(r))
		return ok, err
	})
	if err != nil || ok {
		return false, err
	}
	children, _, err := c.readCount(ctx, r.name)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return false, err
	}
	n, raw, ok := storedCount(children)
	switch {
	case !ok, n == r.permits:
		return false, nil
	case r.sem.permits.Accepts(n):
		r.permits = n
		return true, nil
	}
	return false, seam.PermitsMismatch(raw, r.permits)
}

// setPermits sets name's count to n in one transaction: the count node's
// data (at the version read, so two at once do not both apply), its child
// for n in place of the old one, and a child created and deleted in the
// semaphore's directory, which wakes its waiters.
func (c *Client) setPermits(ctx context.Context, name string, n int) error {
	p, dir := c.permitsPath(name), c.dir(familySemaphore, name)
	want := strconv.Itoa(n)
	for _, d := range []string{c.root + "/permits", dir} {
		if err := c.makeDir(ctx, d); err != nil {
			return err
		}
	}
	backoff := 20 * time.Millisecond
	for try := 1; ; try++ {
		children, st, err := c.readCount(ctx, name)
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			var ops []any
			if st == nil {
				ops = append(ops, &zk.CreateRequest{Path: p, Data: []byte(want), Acl: c.acl})
			} else {
				ops = append(ops, &zk.SetDataRequest{Path: p, Data: []byte(want), Version: st.Version})
			}
			for _, ch := range children {
				if ch != want {
					ops = append(ops, &zk.DeleteRequest{Path: p + "/" + ch, Version: -1})
				}
			}
			if !slices.Contains(children, want) {
				ops = append(ops, &zk.CreateRequest{Path: p + "/" + want, Acl: c.acl})
			}
			ops = append(ops,
				&zk.CreateRequest{Path: dir + "/" + wakeNode, Acl: c.acl},
				&zk.DeleteRequest{Path: dir + "/" + wakeNode, Version: -1})
			_, err = call(ctx, c, func() ([]zk.MultiResponse, error) { return c.conn.Multi(ops...) })
			switch {
			case err == nil:
				return nil
			case try < maxCountTries && (errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode)):
				continue // changed meanwhile: read it again
			}
		}
		if !retryable(err) {
			return err
		}
		if err := sleep(ctx, c, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// storedPermits returns the count ZooKeeper keeps for the semaphore
// name (0: none), for Inspect, listing its count node with list.
func (c *Client) storedPermits(ctx context.Context, name string, list listDir) (int, error) {
	children, _, err := list(ctx, c.permitsPath(name))
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return 0, err
	}
	n, _, _ := storedCount(children)
	return n, nil
}
