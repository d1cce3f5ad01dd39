package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/go-zookeeper/zk"
)

// Node kinds: the first letter of a node's name.
const (
	kindWrite  = 'w' // Mutex, Lock, the write side of an RWLock
	kindRead   = 'r' // the read side of an RWLock
	kindPermit = 's' // a Semaphore permit
)

// node is one granted (or waiting) znode: <kind>-<attempt>-<sequence>.
// It is the GrantOps of its grant.
type node struct {
	c       *Client
	name    string // the lock's name
	attempt string // the attempt id in its name
	path    string
	kind    byte
	owner   string
	sid     int64 // the session that created it
	czxid   int64

	mu       sync.Mutex
	count    int  // reentrant acquisitions not yet released
	gone     bool // deleted, or found lost
	leaseEnd *time.Timer
	stop     chan struct{}  // closed when gone: the guard's end (nil: not guarded)
	fixed    bool           // held by a fixed lease the heartbeat does not renew
	leases   []*dlock.Lease // a fixed hold's Leases (see loseHeld)
}

// end marks n gone and stops its guard; it reports whether n was gone
// already. n.mu is held.
func (n *node) end() (was bool) {
	was = n.gone
	n.gone = true
	if !was && n.stop != nil {
		close(n.stop)
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
func newAttempt() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

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
	i := strings.LastIndexByte(name, '-')
	seq, err := strconv.ParseInt(name[i+1:], 10, 64)
	if err != nil || i < 2 {
		return member{}, false
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

// call runs f, a blocking go-zookeeper request, and returns its result or,
// if ctx ends or the client closes first, ctx's error (errClosed). f goes on
// in the background; its result is then dropped.
func call[T any](ctx context.Context, c *Client, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	case <-c.done:
		var zero T
		return zero, errClosed
	}
}

// created is what a create request returned.
type created struct {
	path  string
	czxid int64
}

// create makes the attempt's ephemeral sequential node in dir and returns
// it, with its czxid (the create and a touch of the directory are one
// transaction, so the directory's mzxid is the node's czxid) and the
// session it belongs to. A create whose reply was lost is looked for by
// its attempt id and adopted, never left behind; a missing directory is
// created. If ctx ends first, whatever the create made is deleted in the
// background.
func (c *Client) create(ctx context.Context, dir string, kind byte, attempt, owner string) (created, int64, error) {
	prefix := dir + "/" + string(kind) + "-" + attempt + "-"
	backoff := 20 * time.Millisecond
	for {
		res := make(chan createResult, 1)
		go func() { res <- c.createOnce(dir, prefix, owner) }()
		var r createResult
		select {
		case r = <-res:
		case <-ctx.Done():
			c.abandon(res, dir, attempt)
			return created{}, 0, ctx.Err()
		case <-c.done:
			c.abandon(res, dir, attempt)
			return created{}, 0, errClosed
		}
		switch {
		case r.err == nil:
			return r.created, r.sid, nil
		case errors.Is(r.err, zk.ErrNoNode):
			if err := c.makeDir(ctx, dir); err != nil {
				return created{}, 0, err
			}
			continue
		case errors.Is(r.err, zk.ErrSessionExpired):
			// The session's nodes are gone with it: create again.
		case retryable(r.err):
			// The create may have been applied: create again only once a
			// listing says it was not, so the attempt never has two nodes.
			got, sid, err := c.findSure(ctx, dir, attempt)
			if err != nil {
				go c.deleteAttempt(dir, attempt)
				return created{}, 0, err
			}
			if got.path != "" {
				return got, sid, nil
			}
		default:
			return created{}, 0, r.err
		}
		if err := sleep(ctx, c, backoff); err != nil {
			go c.deleteAttempt(dir, attempt)
			return created{}, 0, err
		}
		backoff = min(2*backoff, time.Second)
	}
}

type createResult struct {
	created
	sid int64
	err error
}

func (c *Client) createOnce(dir, prefix, owner string) createResult {
	rs, err := c.conn.Multi(
		&zk.CreateRequest{Path: prefix, Data: []byte(owner), Acl: c.acl, Flags: zk.FlagEphemeral | zk.FlagSequence},
		&zk.SetDataRequest{Path: dir, Data: nil, Version: -1},
	)
	sid := c.conn.SessionID()
	if err == nil {
		for _, r := range rs {
			if r.Error != nil {
				err = r.Error
				break
			}
		}
	}
	if err != nil {
		return createResult{err: err}
	}
	if len(rs) != 2 || rs[1].Stat == nil || rs[0].String == "" {
		return createResult{err: errors.New("zklock: malformed multi reply")}
	}
	return createResult{created: created{path: rs[0].String, czxid: rs[1].Stat.Mzxid}, sid: sid}
}

// find looks for the node of attempt in dir, as the current session's.
func (c *Client) find(ctx context.Context, dir, attempt string) (created, int64, error) {
	children, err := call(ctx, c, func() ([]string, error) {
		ch, _, err := c.conn.Children(dir)
		return ch, err
	})
	if err != nil {
		return created{}, 0, err
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
			return created{}, 0, nil
		}
		if err != nil {
			return created{}, 0, err
		}
		if stat.EphemeralOwner != c.conn.SessionID() {
			return created{}, 0, nil // another session's: it goes with that session
		}
		return created{path: path, czxid: stat.Czxid}, stat.EphemeralOwner, nil
	}
	return created{}, 0, nil
}

// cancelGrace is how long a cancelled Acquire waits for ZooKeeper to
// answer the create or delete in flight, so that it returns with its node
// deleted; past it the node is deleted in the background.
const cancelGrace = time.Second

// findSure is find retried across reconnections until it gives an answer.
func (c *Client) findSure(ctx context.Context, dir, attempt string) (created, int64, error) {
	backoff := 20 * time.Millisecond
	for {
		got, sid, err := c.find(ctx, dir, attempt)
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
func (c *Client) abandon(res <-chan createResult, dir, attempt string) {
	clean := func(r createResult) {
		if r.err == nil {
			c.deletePath(r.path, r.sid)
		} else if retryable(r.err) {
			c.deleteAttempt(dir, attempt)
		}
	}
	t := time.NewTimer(cancelGrace)
	defer t.Stop()
	select {
	case r := <-res:
		ctx, cancel := context.WithTimeout(context.Background(), cancelGrace)
		defer cancel()
		if r.err == nil {
			n := &node{c: c, path: r.path, sid: r.sid}
			if err := n.delete(ctx); err == nil || !retryable(err) {
				return
			}
		}
		go clean(r)
	case <-t.C:
		go func() { clean(<-res) }()
	}
}

// deleteAttempt deletes attempt's node in dir if there is one.
func (c *Client) deleteAttempt(dir, attempt string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	for ctx.Err() == nil {
		got, sid, err := c.find(ctx, dir, attempt)
		if err == nil {
			if got.path != "" {
				c.deletePath(got.path, sid)
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
		err := c.conn.Delete(path, -1)
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

var _ dlock.GrantOps = (*node)(nil)
