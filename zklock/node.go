package zklock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock/seam"
	"github.com/go-zookeeper/zk"
)

// Node kinds: the first letter of a node's name.
const (
	kindWrite = 'w' // Mutex, Lock, the write side of an RWLock
	kindRead  = 'r' // the read side of an RWLock
	// kindDown is a read node made while its owner's write node existed (a
	// downgrade, made in one transaction with a check of that node): it
	// holds at once, and every writer waits for it, also one queued
	// before it.
	kindDown   = 'd'
	kindPermit = 's' // a Semaphore permit
)

// modeOf returns the mode of a node of kind k (an unknown kind: Exclusive).
func modeOf(k byte) seam.Mode {
	switch k {
	case kindRead:
		return seam.Shared
	case kindPermit:
		return seam.Permit
	case kindDown:
		return seam.Downgrade
	}
	return seam.Exclusive
}

// node is one granted (or waiting) acquisition: its znode
// <kind>-<attempt>-<sequence> (a MultiLock's: one in each member's
// directory, made in one transaction). It is the GrantOps of its grant.
type node struct {
	c       *Client
	attempt string   // the attempt id in its name
	path    string   // its znode (a MultiLock's first member's)
	more    []string // a MultiLock's other members' znodes
	kind    byte
	owner   string // its owner, for a reentrant shape; ""
	sid     int64  // the session that created it
	czxid   int64
	first   time.Time // a renewed hold's first deadline (set before its grant)

	mu       sync.Mutex
	gone     bool        // released, or found lost
	leaseEnd *time.Timer // ends a fixed lease longer than the first span, at endsAt
	endsAt   time.Time
	later    *time.Timer       // starts the guards (watchLater)
	stop     chan struct{}     // closed when gone: the guards' end (nil: not guarded)
	hold     *seam.Hold[*node] // its hold, once the Keeper has it
}

// paths returns n's znodes.
func (n *node) paths() []string {
	if len(n.more) == 0 {
		return []string{n.path}
	}
	return append([]string{n.path}, n.more...)
}

// end marks n gone and stops its guard; it reports whether n was gone
// already. n.mu is held.
func (n *node) end() (was bool) {
	was = n.gone
	n.gone = true
	if !was && n.stop != nil {
		close(n.stop)
	}
	if n.leaseEnd != nil {
		n.leaseEnd.Stop()
	}
	if n.later != nil {
		n.later.Stop()
	}
	return was
}

// dir returns the directory of a lock: one per name and family.
func (c *Client) dir(family, name string) string {
	return c.root + "/" + family + "/" + escape(name)
}

// escape makes a lock name one valid znode name: every byte that is not a
// letter, digit, '-', '_', '.' or '~' as %XX, and "." and ".." spelled out.
func escape(name string) string {
	s := url.PathEscape(name)
	s = strings.ReplaceAll(s, ":", "%3A") // PathEscape keeps these; keep names plain
	switch s {
	case ".", "..":
		return strings.Repeat("%2E", len(s))
	}
	return s
}

// newAttempt returns a fresh id for one acquisition attempt: it is in the
// node's name, so a node whose create reply was lost can be found again.
// (A MultiLock's nodes share one.)
func newAttempt() string { return seam.NewID() }

// member is one child of a lock's directory.
type member struct {
	name string
	kind byte
	seq  int64
}

// parseMember reads <kind>-<attempt>-<seq>; ok is false for anything else.
func parseMember(name string) (member, bool) {
	if len(name) < 14 || name[1] != '-' {
		return member{}, false
	}
	i := len(name)
	for i > 2 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if i < 3 || i == len(name) || len(name)-i > 18 || name[i-1] != '-' {
		return member{}, false
	}
	var seq int64
	for _, d := range name[i:] {
		seq = seq*10 + int64(d-'0')
	}
	return member{name: name, kind: name[0], seq: seq}, true
}

// queue returns the lock's members in grant order.
func queue(children []string) []member {
	ms := make([]member, 0, len(children))
	for _, ch := range children {
		if m, ok := parseMember(ch); ok {
			ms = append(ms, m)
		}
	}
	slices.SortFunc(ms, func(a, b member) int { return int(a.seq - b.seq) })
	return ms
}

// retryable reports errors after which the request may or may not have been
// applied and the session may still be alive: the connection dropped.
func retryable(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) || errors.Is(err, zk.ErrClosing)
}

// call runs f, a blocking go-zookeeper request, once the connection is
// settled (see settled: while it is down, call returns errNotConnected and
// f does not run), and returns its result or, if ctx ends or the client
// closes first, ctx's error (errClosed). f runs on a worker of the
// client's (tasks.Workers: a reused goroutine) and goes on in the
// background if the caller gives up; its result is then dropped. With a
// ctx that cannot end (context.Background) f runs on the caller's
// goroutine, which then waits for ZooKeeper's answer (or the connection's
// loss) even after Close: the client's own background calls use c.ctx,
// which Close ends.
func call[T any](ctx context.Context, c *Client, f func() (T, error)) (T, error) {
	if err := c.settled(ctx); err != nil {
		var zero T
		return zero, err
	}
	if ctx.Done() == nil {
		return f()
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	if !c.workers.Go(func() {
		v, err := f()
		ch <- result{v, err}
	}) {
		var zero T
		return zero, errClosed
	}
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		if ctx == c.ctx {
			return zero, errClosed
		}
		return zero, ctx.Err()
	case <-c.done:
		var zero T
		return zero, errClosed
	}
}

// created is what a create request returned.
type created struct {
	paths []string // one per directory
	czxid int64
	// alone[i] says the node in directory i was its only child when it was
	// made (the directory's numChildren was 1 after the transaction): it
	// is first in line, and granted without a listing.
	alone []bool
	sent  time.Time // when the transaction was sent (zero: not known)
}

// create makes the attempt's ephemeral sequential node in each of dirs, in
// one transaction, and returns them, with their czxid (the creates and a
// touch of each directory are one transaction, so the directories' mzxid
// is the nodes' czxid; the touch's reply also says how many children each
// directory has) and the session they belong to. If check is not "",
// the transaction also checks that the node check exists (a Semaphore's
// count, see countCheck; the write node of a downgrade, see under), and fails with errCheck, making nothing, if it
// does not. A create whose
// reply was lost is looked for by its attempt id and adopted, never left
// behind; a missing directory is created. If ctx ends first, whatever the
// create made is deleted in the background.
func (c *Client) create(ctx context.Context, dirs []string, kind byte, attempt string, data []byte, check string) (created, int64, error) {
	prefix := string(kind) + "-" + attempt + "-"
	backoff := 20 * time.Millisecond
	for {
		var r createResult
		if ctx.Done() == nil { // nothing to abandon it for (see call)
			r = c.createOnce(dirs, prefix, data, check)
		} else {
			res := make(chan createResult, 1)
			if !c.workers.Go(func() { res <- c.createOnce(dirs, prefix, data, check) }) {
				return created{}, 0, errClosed
			}
			select {
			case r = <-res:
			case <-ctx.Done():
				c.abandon(res, dirs, attempt)
				return created{}, 0, ctx.Err()
			case <-c.done:
				c.abandon(res, dirs, attempt)
				return created{}, 0, errClosed
			}
		}
		switch {
		case r.err == nil:
			return r.created, r.sid, nil
		case errors.Is(r.err, zk.ErrNoNode):
			if err := c.makeDir(ctx, dirs[r.failed]); err != nil {
				return created{}, 0, err
			}
			continue
		case errors.Is(r.err, zk.ErrSessionExpired):
			// The session's nodes are gone with it: create again.
		case retryable(r.err):
			// The create may have been applied: create again only once a
			// listing says it was not, so the attempt never has two nodes.
			got, sid, err := c.findSure(ctx, dirs, attempt)
			if err != nil {
				go c.deleteAttempt(dirs, attempt)
				return created{}, 0, err
			}
			if got.paths != nil {
				return got, sid, nil
			}
		default:
			return created{}, 0, r.err
		}
		if err := sleep(ctx, c, backoff); err != nil {
			go c.deleteAttempt(dirs, attempt)
			return created{}, 0, err
		}
		backoff = min(2*backoff, time.Second)
	}
}

type createResult struct {
	created
	sid    int64
	failed int // the directory of the op that failed
	err    error
}

func (c *Client) createOnce(dirs []string, prefix string, data []byte, check string) createResult {
	ops := make([]any, 0, 2*len(dirs)+1)
	for _, dir := range dirs {
		ops = append(ops,
			&zk.CreateRequest{Path: dir + "/" + prefix, Data: data, Acl: c.acl, Flags: zk.FlagEphemeral | zk.FlagSequence},
			&zk.SetDataRequest{Path: dir, Data: nil, Version: -1})
	}
	if check != "" {
		ops = append(ops, &zk.CheckVersionRequest{Path: check, Version: -1})
	}
	if err := c.settled(c.ctx); err != nil {
		return createResult{err: err}
	}
	sent := time.Now()
	rs, err := c.conn.Multi(ops...)
	sid := c.conn.SessionID()
	failed := 0
	for i, r := range rs {
		// The op that failed has its own error; the others' say they were
		// rolled back (runtime inconsistency, which go-zookeeper does not
		// name), and Multi returns the first error of all.
		if r.Error != nil && !strings.HasPrefix(r.Error.Error(), "unknown error") {
			err, failed = r.Error, i/2
			if i == 2*len(dirs) { // the check
				err = errCheck
			}
			break
		}
	}
	if err != nil {
		return createResult{err: err, failed: failed}
	}
	if len(rs) != len(ops) {
		return createResult{err: errors.New("malformed multi reply")}
	}
	got := created{paths: make([]string, len(dirs)), alone: make([]bool, len(dirs)), sent: sent}
	for i := range dirs {
		if rs[2*i].String == "" || rs[2*i+1].Stat == nil {
			return createResult{err: errors.New("malformed multi reply")}
		}
		got.paths[i] = rs[2*i].String
		got.czxid = rs[2*i+1].Stat.Mzxid
		got.alone[i] = rs[2*i+1].Stat.NumChildren == 1
	}
	return createResult{created: got, sid: sid}
}

// find looks for the nodes of attempt in dirs, as the current session's:
// all of them (the transaction that made them was applied), or none.
func (c *Client) find(ctx context.Context, dirs []string, attempt string) (created, int64, error) {
	var got created
	var sid int64
	for i, dir := range dirs {
		path, st, err := c.findIn(ctx, dir, attempt)
		if err != nil {
			return created{}, 0, err
		}
		if path == "" {
			if i > 0 { // one was deleted from outside: start again without them
				for _, p := range got.paths {
					c.deletePath(p, sid)
				}
			}
			return created{}, 0, nil
		}
		got.paths = append(got.paths, path)
		got.czxid, sid = st.Czxid, st.EphemeralOwner
	}
	return got, sid, nil
}

// findIn looks for the node of attempt in dir, as the current session's.
func (c *Client) findIn(ctx context.Context, dir, attempt string) (string, *zk.Stat, error) {
	children, err := call(ctx, c, func() ([]string, error) {
		ch, _, err := c.conn.Children(dir)
		return ch, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	for _, ch := range children {
		if !strings.Contains(ch, "-"+attempt+"-") {
			continue
		}
		path := dir + "/" + ch
		stat, err := call(ctx, c, func() (*zk.Stat, error) {
			_, st, err := c.conn.Get(path)
			return st, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return "", nil, nil
		}
		if err != nil {
			return "", nil, err
		}
		if stat.EphemeralOwner != c.conn.SessionID() {
			return "", nil, nil // another session's: it goes with that session
		}
		return path, stat, nil
	}
	return "", nil, nil
}

// cancelGrace is how long a cancelled Acquire waits for ZooKeeper to
// answer the create or delete in flight, so that it returns with its node
// deleted; past it the node is deleted in the background.
const cancelGrace = time.Second

// findSure is find retried across reconnections until it gives an answer.
func (c *Client) findSure(ctx context.Context, dirs []string, attempt string) (created, int64, error) {
	backoff := 20 * time.Millisecond
	for {
		got, sid, err := c.find(ctx, dirs, attempt)
		if !retryable(err) {
			return got, sid, err
		}
		if err := sleep(ctx, c, backoff); err != nil {
			return created{}, 0, err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// abandon deletes what a create nobody waits for any more made: at once
// if its reply comes within cancelGrace, else in the background.
func (c *Client) abandon(res <-chan createResult, dirs []string, attempt string) {
	clean := func(r createResult) {
		if r.err == nil {
			for _, p := range r.paths {
				c.deletePath(p, r.sid)
			}
		} else if retryable(r.err) {
			c.deleteAttempt(dirs, attempt)
		}
	}
	t := time.NewTimer(cancelGrace)
	defer t.Stop()
	select {
	case r := <-res:
		ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
		defer cancel()
		if r.err == nil {
			n := &node{c: c, path: r.paths[0], more: r.paths[1:], sid: r.sid}
			if _, err := n.delete(ctx); err == nil || !retryable(err) {
				return
			}
		}
		go clean(r)
	case <-t.C:
		go func() { clean(<-res) }()
	}
}

// deleteAttempt deletes attempt's nodes in dirs if there are any.
func (c *Client) deleteAttempt(dirs []string, attempt string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	for ctx.Err() == nil {
		got, sid, err := c.find(ctx, dirs, attempt)
		if err == nil {
			for _, p := range got.paths {
				c.deletePath(p, sid)
			}
			return
		}
		if sleep(ctx, c, 50*time.Millisecond) != nil {
			return
		}
	}
}

// deletePath deletes path, a node of session sid; a missing node is fine.
// It retries while the connection is down, until the session is gone or for
// twice the session timeout (the session cannot outlive a disconnection
// that long).
func (c *Client) deletePath(path string, sid int64) error {
	deadline := time.Now().Add(2*c.timeout + 5*time.Second)
	for {
		if now := c.conn.SessionID(); now != sid && now != 0 {
			return nil // the session ended: its nodes are gone
		}
		err := c.settled(c.ctx)
		if err == nil {
			err = c.conn.Delete(path, -1)
		}
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrSessionExpired):
			return nil
		case !retryable(err) || errors.Is(err, zk.ErrClosing) || time.Now().After(deadline):
			return err
		}
		select {
		case <-c.done: // closed: a Dial client's session ends with it
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// makeDir creates dir and its parents (persistent, empty).
func (c *Client) makeDir(ctx context.Context, dir string) error {
	parts := strings.Split(dir[1:], "/")
	p := ""
	for _, part := range parts {
		p += "/" + part
		_, err := call(ctx, c, func() (string, error) { return c.conn.Create(p, nil, 0, c.acl) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("creating %s: %w", p, err)
		}
	}
	return nil
}

// sleep waits d, or returns ctx's error or errClosed.
func sleep(ctx context.Context, c *Client, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-c.done:
		return errClosed
	}
}

var _ seam.GrantOps = (*node)(nil)
