package etcdlock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// MaxMultiNames is the most names one MultiLock takes (its transactions
// stay within etcd's default limit of 128 operations).
const MaxMultiNames = 64

// MultiLock locks several names as one: it is acquired only when every
// name is, and nothing is ever held for only some of them. One transaction
// writes a key under every name's Lock directory (so a MultiLock excludes
// a Lock on any of its names); all the keys have one create revision, the
// token, and the attempt is granted once no older key is left under any of
// the names (it waits for them in canonical order). A partial state cannot
// arise: the keys are created together, given up together, and go
// together with their session. Names are sorted whatever order the caller
// gives; since every key of one attempt has the same revision, two
// MultiLocks over overlapping names wait for each other in one order (the
// older first): they never deadlock.
//
// While it waits, a MultiLock's keys keep their places under every name:
// a Lock or MultiLock that comes later waits behind it even on a name that
// is free (arrival order, as for every lock of etcdlock). The lease is lost
// as soon as any member key is lost. Its Token is the keys' create
// revision, greater than the token of every earlier grant on any of its
// names.
//
// A MultiLock is reentrant like Lock (the same MultiLock, acquired under
// one of its Leases' Context, re-enters). It does not re-enter a name its
// owner holds through another Lock or MultiLock of the same Client: that
// would wait for itself, so Acquire refuses it with ErrInvalidArgument (on
// Redis the member is re-entered).
type MultiLock struct {
	c     *Client
	names []string // sorted
}

// MultiLock returns the lock over names (in any order). The names are
// checked by Acquire: 1 to MaxMultiNames of them, each a valid name, no
// duplicates.
func (c *Client) MultiLock(names ...string) *MultiLock {
	return &MultiLock{c: c, names: slices.Sorted(slices.Values(names))}
}

// Name returns the member names in canonical order, joined by ",".
func (m *MultiLock) Name() string { return strings.Join(m.names, ",") }

// Acquire takes every member or none; see dlock.Locker and MultiLock.
func (m *MultiLock) Acquire(ctx context.Context, opts ...dlock.Option) (*dlock.Lease, error) {
	c := m.c
	dirs := make([]string, len(m.names))
	quoted := make([]string, len(m.names))
	for i, n := range m.names {
		dirs[i] = c.dir("lock", n)
		quoted[i] = strconv.Quote(n)
	}
	id := strings.Join(quoted, ",")
	first := make([]clientv3.Op, len(dirs))
	for i, d := range dirs {
		// The two newest keys: ours, and the one in front of it.
		first[i] = clientv3.OpGet(d, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(2), clientv3.WithKeysOnly())
	}
	return c.acquire(ctx, shape{
		kind: "multi", name: m.Name(), dirs: dirs,
		hold:   func(owner string) string { return holdKey("multi", id, owner) },
		check:  m.validate,
		refuse: func(a *attempt) error { return a.notHeldElsewhere(dirs, m.names) },
		first:  first,
		later: func(rev int64) []clientv3.Op {
			ops := make([]clientv3.Op, len(dirs))
			for i, d := range dirs {
				ops[i] = clientv3.OpGet(d, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(rev-1), clientv3.WithKeysOnly())...)
			}
			return ops
		},
		blocker: func(resps []*etcdserverpb.ResponseOp, rev int64) (string, bool) {
			for _, r := range resps {
				if k := ahead(r, rev); k != "" {
					return k, false
				}
			}
			return "", false
		},
	}, opts)
}

func (m *MultiLock) validate() error {
	switch {
	case len(m.names) == 0:
		return fmt.Errorf("%w: a MultiLock needs at least one name", dlock.ErrInvalidArgument)
	case len(m.names) > MaxMultiNames:
		return fmt.Errorf("%w: %d names in a MultiLock (at most %d)", dlock.ErrInvalidArgument, len(m.names), MaxMultiNames)
	}
	for i, n := range m.names {
		if err := seam.CheckName(n); err != nil {
			return err
		}
		if i > 0 && n == m.names[i-1] {
			return fmt.Errorf("%w: name %q appears twice in a MultiLock", dlock.ErrInvalidArgument, n)
		}
	}
	return nil
}

// notHeldElsewhere refuses an attempt whose owner holds, through another
// Lock or MultiLock of this Client, one of names (under dirs): its keys
// would queue behind the owner's own and wait for ever.
func (a *attempt) notHeldElsewhere(dirs, names []string) error {
	if !a.carried() {
		return nil // a new owner holds nothing
	}
	for _, h := range a.c.holds() {
		hk := h.Ops().hold
		if hk == a.hold || !strings.HasSuffix(hk, "\x00"+a.owner) || !(strings.HasPrefix(hk, "lock\x00") || strings.HasPrefix(hk, "multi\x00")) {
			continue
		}
		for _, k := range h.Ops().keys {
			for i, d := range dirs {
				if strings.HasPrefix(k, d) {
					return fmt.Errorf("%w: the owner holds %q through %s %q: etcdlock does not re-enter it through another lock (it would wait for itself)",
						dlock.ErrInvalidArgument, names[i], strings.SplitN(hk, "\x00", 2)[0], h.Name())
				}
			}
		}
	}
	return nil
}

// notInMulti refuses a Lock whose owner holds its name through a
// MultiLock of this Client (see notHeldElsewhere).
func (a *attempt) notInMulti() error { return a.notHeldElsewhere(a.sh.dirs, []string{a.sh.name}) }

// carried reports whether the caller's ctx carries an owner (a fresh one
// holds nothing).
func (a *attempt) carried() bool { return seam.CarriedOwner(a.ctx) != "" }
