package zklock

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

var _ interface {
	Inspect(context.Context, string) (dlock.Info, error)
} = (*Client)(nil)

// Inspect reads the state of the lock called name, whatever its shape,
// without changing it: one listing of its directory and one read of each
// node in it, and one listing of a Semaphore's count (not one snapshot: a
// node that leaves between the two is left out). Its fields mean what they mean on Redis (dlock.Info), read from
// ZooKeeper as follows:
//
//   - Holders are the nodes granted now (the first in line; readers with no
//     writer before them; the first permits of a Semaphore), Queue the
//     others, in line. Host, PID, Label and Since come from the metadata a
//     node carries (Since: when the node was queued, on its holder's
//     clock). ID is the first 8 characters of the node's name (Lease.ID).
//
//   - Fence is the node's czxid (Lease.Token); LastFence the largest token
//     held now, or, when nothing is held, the token of the last node
//     queued (the directory's mzxid): a later grant's token is larger.
//
//   - Count is 1: a holder's re-entries are counted by its Client, not in
//     ZooKeeper.
//
//   - TTL is how long a hold outlives its holder's last sign of life (its
//     session timeout, or a shorter fixed lease), not a countdown: the
//     server alone knows when it last heard from that session. Info.TTL is
//     the exclusive holder's; -1 when the lock is free or each holder has
//     its own (readers, permits).
//
//   - A waiter's place lives as long as its session: Waiter.Deadline is
//     -1. A waiting reader's Mode is "read".
//
//   - Permits is a Semaphore's count, as ZooKeeper keeps it (a free
//     semaphore whose count is kept is Shape "semaphore", not held).
//
// A Semaphore is a lock of its own on ZooKeeper: when the name has nodes of
// both families, Inspect reports the Mutex/Lock/RWLock/MultiLock one.
func (c *Client) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	info, _, err := c.inspect(ctx, name, c.children)
	return info, err
}

// listDir lists a directory for inspect: its children and its Stat, or an
// error wrapping zk.ErrNoNode when it is missing. Client.Inspect's lists
// plainly (children); a Lister's leaves a watch on what it lists.
type listDir func(ctx context.Context, path string) ([]string, *zk.Stat, error)

// children is the listDir of Client.Inspect: one listing, no watch.
func (c *Client) children(ctx context.Context, path string) ([]string, *zk.Stat, error) {
	type dirList struct {
		names []string
		st    *zk.Stat
	}
	l, err := call(ctx, c, func() (dirList, error) {
		ch, st, err := c.conn.Children(path)
		return dirList{ch, st}, err
	})
	return l.names, l.st, err
}

// inspect is Inspect listing each directory it reads (a lock directory,
// a Semaphore's count) with list; strays are the children of the lock
// directories it read that are no node of a lock, as paths under the root
// ("lock/<escaped name>/<child>").
func (c *Client) inspect(ctx context.Context, name string, list listDir) (info dlock.Info, strays []string, err error) {
	info = dlock.Info{Name: name, TTL: -1}
	if err := seam.CheckContext(ctx); err != nil {
		return info, nil, seam.Wrap("inspect", "", name, err)
	}
	if err := seam.CheckName(name); err != nil {
		return info, nil, seam.Wrap("inspect", "", name, err)
	}
	if c.closed() {
		return info, nil, seam.Wrap("inspect", "", name, dlock.ErrClosed)
	}
	var last int64
	for _, family := range []string{familyLock, familySemaphore} {
		d, err := c.readDir(ctx, c.dir(family, name), list)
		if err != nil {
			if errors.Is(err, errClosed) {
				err = dlock.ErrClosed
			}
			return info, nil, seam.StoreErr(ctx, "inspect", "", name, err)
		}
		strays = append(strays, d.strays...)
		if family == familySemaphore {
			if info.Permits, err = c.storedPermits(ctx, name, list); err != nil {
				if errors.Is(err, errClosed) {
					err = dlock.ErrClosed
				}
				return info, nil, seam.StoreErr(ctx, "inspect", "", name, err)
			}
		}
		if len(d.nodes) == 0 {
			last = max(last, d.mzxid)
			continue
		}
		d.describe(&info)
		return info, strays, nil
	}
	info.LastFence = last
	if info.Permits > 0 { // a free semaphore: its count stays
		info.Shape = "semaphore"
	}
	return info, strays, nil
}

// listed is a lock directory as Inspect read it.
type listed struct {
	mzxid  int64
	nodes  []listedNode // in line
	strays []string     // its children that are no node (see inspect)
}

type listedNode struct {
	member
	meta nodeMeta
	st   *zk.Stat
}

// readDir lists dir with list and reads its nodes (up to 32 reads in
// flight).
func (c *Client) readDir(ctx context.Context, dir string, list listDir) (listed, error) {
	names, st, err := list(ctx, dir)
	if errors.Is(err, zk.ErrNoNode) {
		return listed{}, nil
	}
	if err != nil {
		return listed{}, err
	}
	d := listed{mzxid: st.Mzxid, strays: c.strays(dir, names)}
	q := queue(names)
	nodes := make([]listedNode, len(q))
	errs := make([]error, len(q))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 32)
	for i, m := range q {
		nodes[i].member = m
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			type got struct {
				data []byte
				st   *zk.Stat
			}
			g, err := call(ctx, c, func() (got, error) {
				data, st, err := c.conn.Get(dir + "/" + m.name)
				return got{data, st}, err
			})
			switch {
			case errors.Is(err, zk.ErrNoNode): // it left: leave it out
			case err != nil:
				errs[i] = err
			default:
				nodes[i].meta, nodes[i].st = parseMeta(g.data), g.st
			}
		}()
	}
	wg.Wait()
	for _, err := range errs { // the first: one line
		if err != nil {
			return listed{}, err
		}
	}
	for _, n := range nodes {
		if n.st != nil {
			d.nodes = append(d.nodes, n)
		}
	}
	return d, nil
}

// describe fills info from d, a directory with nodes.
func (d listed) describe(info *dlock.Info) {
	first := d.nodes[0]
	switch {
	case first.kind == kindPermit:
		info.Shape = "semaphore"
		if info.Permits == 0 { // nodes of a version that kept no count
			info.Permits = first.meta.permits
		}
	case first.kind == kindRead, first.kind == kindDown, first.meta.shape == "rw_write":
		info.Shape = "rw"
	case first.meta.shape != "":
		info.Shape = first.meta.shape
	default:
		info.Shape = "mutex"
	}
	for i, n := range d.nodes {
		if !d.granted(i, info.Permits) {
			info.Queue = append(info.Queue, dlock.Waiter{ID: seam.ShortID(n.name), Host: n.meta.host, PID: n.meta.pid, Label: n.meta.label,
				Since: n.meta.since, Mode: mode(n), Deadline: -1})
			continue
		}
		h := dlock.Holder{ID: seam.ShortID(n.name), Host: n.meta.host, PID: n.meta.pid, Label: n.meta.label, Since: n.meta.since,
			Count: 1, Fence: n.st.Czxid, Mode: mode(n), TTL: n.meta.lease}
		if n.kind == kindWrite {
			info.TTL = h.TTL
		}
		info.Holders = append(info.Holders, h)
		info.LastFence = max(info.LastFence, h.Fence)
	}
	info.Held = len(info.Holders) > 0
	if !info.Held {
		info.LastFence = d.mzxid
	}
}

// granted reports whether the i-th node in line holds the lock, by the
// rule of a grant (as request.admitted reads it): its owner's own is the
// first node's of the same owner (a reader's write hold, or the downgrade
// the first writer took).
func (d listed) granted(i, permits int) bool {
	n := d.nodes[i]
	ad := seam.Admit(modeOf(n.kind), permits)
	for j, m := range d.nodes {
		if j != i {
			own := (i == 0 || j == 0) && n.meta.owner != "" && m.meta.owner == n.meta.owner
			ad.See(seam.Other{Mode: modeOf(m.kind), Ahead: j < i, Own: own})
		}
	}
	return ad.Granted()
}

// mode is a node's Mode: "read" or "write" for an RWLock's.
func mode(n listedNode) string {
	switch {
	case n.kind == kindRead, n.kind == kindDown:
		return "read"
	case n.meta.shape == "rw_write":
		return "write"
	}
	return ""
}

// strays returns the children of dir, a lock directory, that are no node
// of a lock (queue leaves them out), as paths under the root; a
// Semaphore's directory may have SetPermits' wakeNode for an instant.
func (c *Client) strays(dir string, children []string) []string {
	var out []string
	for _, ch := range children {
		if _, ok := parseMember(ch); ok || (ch == wakeNode && strings.HasPrefix(dir, c.root+"/"+familySemaphore+"/")) {
			continue
		}
		out = append(out, dir[len(c.root)+1:]+"/"+ch)
	}
	return out
}
