package etcdlock

import (
	"github.com/dlockgo/dlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// noLease is a key no lease of this package is held under: IsOwner of
// anything else compares against it and never holds.
const noLease = "\x00etcdlock: not a lease"

// IsOwner returns a comparison that holds, inside an etcd transaction, only
// while l's grant still holds its lock: its key exists with the create
// revision l.Token(). Put it in the If of your own transaction so a write
// commits only under the lock, in one round trip:
//
//	txn := cli.Txn(ctx).If(etcdlock.IsOwner(lease)).Then(clientv3.OpPut(k, v))
//
// For a MultiLock the comparison is on the key of its first name (in
// canonical order); all its keys were created together. For a nil Lease,
// or one not from this package, the comparison never holds. It does not read the Lease's local state: Lease.Err may already
// report a loss that etcd has not yet applied.
func IsOwner(l *dlock.Lease) clientv3.Cmp {
	if l == nil || l.Token() <= 0 {
		return clientv3.Compare(clientv3.CreateRevision(noLease), "=", -1)
	}
	return clientv3.Compare(clientv3.CreateRevision(l.ID()), "=", l.Token())
}
