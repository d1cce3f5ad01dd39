package etcdlock

import (
	"context"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
)

// reentry counts the Leases of one owner's reentrant hold (a Lock, or one
// side of an RWLock): re-entries cost nothing in etcd, and the key is
// deleted when the last Lease is released.
type reentry struct {
	c   *Client
	key string // the Client's table key and the hold's dlock.Grant.Key
	ops *grantOps

	mu    sync.Mutex
	count int  // Leases not yet released
	lost  bool // a Lease of the hold was reported lost
}

func reentryKey(kind, name, owner string) string { return kind + "\x00" + name + "\x00" + owner }

// live reports whether the hold can take a re-entry.
func (r *reentry) live() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count > 0 && !r.lost
}

// release counts one Lease out; true when it was the last (the key is to
// be deleted), and the record leaves the Client's table.
func (r *reentry) release() bool {
	r.mu.Lock()
	r.count--
	last := r.count <= 0
	r.mu.Unlock()
	if last {
		r.c.tableMu.Lock()
		if r.c.reent[r.key] == r {
			delete(r.c.reent, r.key)
		}
		r.c.tableMu.Unlock()
	}
	return last
}

func (r *reentry) markLost() {
	r.mu.Lock()
	r.lost = true
	r.mu.Unlock()
}

// onLost wraps a Lease's OnLost: the record stops taking re-entries.
func (r *reentry) onLost(user func(*dlock.Lease)) func(*dlock.Lease) {
	return func(l *dlock.Lease) {
		r.markLost()
		if user != nil {
			user(l)
		}
	}
}

// lookup returns owner's live hold of kind on name, or nil.
func (c *Client) lookup(kind, name, owner string) *reentry {
	c.tableMu.Lock()
	r := c.reent[reentryKey(kind, name, owner)]
	c.tableMu.Unlock()
	if r != nil && r.live() {
		return r
	}
	return nil
}

// register makes r the owner's hold in the Client's table.
func (c *Client) register(r *reentry) {
	c.tableMu.Lock()
	c.reent[r.key] = r
	c.tableMu.Unlock()
}

// join makes a new Lease of r's hold for a re-entry. It returns nil, nil
// if the hold ended in the meantime (the caller then acquires afresh).
//
// The seam has no "join or fail": Keeper.Lease joins a live hold with the
// same Key, and otherwise starts a new one. So the re-entry's own grant is
// one that is already past its deadline, with operations that touch
// nothing: joining a live hold it takes that hold's deadline and
// operations; starting a new hold it is lost at once, and is dropped.
func (c *Client) join(ctx context.Context, r *reentry, shape, name, owner string, onLost func(*dlock.Lease)) (*dlock.Lease, error) {
	r.mu.Lock()
	if r.count <= 0 || r.lost {
		r.mu.Unlock()
		return nil, nil
	}
	r.count++
	r.mu.Unlock()
	decided := make(chan struct{})
	var joined bool
	l, err := c.keeper.Lease(ctx, dlock.Grant{
		Shape: shape, Name: name, Key: r.key, Owner: owner, ID: r.ops.key, Token: r.ops.rev,
		Sent: time.Time{}, Ops: nopOps{},
		OnLost: func(l *dlock.Lease) {
			<-decided
			if joined {
				r.onLost(onLost)(l)
			}
		},
	})
	if err != nil {
		close(decided)
		r.undo()
		return nil, err
	}
	joined = l.Err() == nil
	close(decided)
	if !joined {
		r.undo()
		return nil, nil
	}
	return l, nil
}

// undo takes back a re-entry that got no Lease; if that leaves no Lease,
// the key is released.
func (r *reentry) undo() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = r.ops.Release(ctx)
}
