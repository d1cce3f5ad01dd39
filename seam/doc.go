// Package seam is the backend author's page of dlock: how a lock service
// other than Redis (etcdlock, zklock, or your own) hands out the same
// *dlock.Lease that the Redis locks return, with the same lost-lock
// contract, options, errors and events.
//
// A backend grants a lock in its store and gives the grant to a Keeper:
//
//	k := seam.NewKeeper[*myOps](cfg.Observer, cfg.Logger) // one per backend client
//	call, err := k.Begin(ctx, seam.Request{Shape: "lock", Name: name}, opts) // input checked, event begun
//	if err != nil {
//		return nil, err
//	}
//	defer func() { err = call.End(l, err) }() // the event; the error named once
//	o := call.Options                                // Wait, Lease, QueueTimeout, OnLost, MaxHold
//	if l, ok := k.Join(ctx, key, seam.OwnerOf(ctx), o.OnLost); ok {
//		// a re-entry: the Keeper counts it, the store need not know, but
//		// for its options (a longer LeaseTime, a MaxHold)
//		if err := k.Reentered(ctx, l, o); err != nil {
//			return nil, err
//		}
//		return l, nil
//	}
//	// ... grant the lock in the store: its token, when the request was sent ...
//	return k.Lease(ctx, seam.Grant[*myOps]{Shape: "lock", Name: name, Key: key, ...})
//
// A store that keeps a lock's waiters in line (etcd's keys, ZooKeeper's
// sequential nodes) need not write its own acquire loop: it writes a
// Line, its operations on one call's place (Join, Look, Wait, Grant,
// Leave, Transient), and Queue runs them under the call's WaitContext,
// with every decision the same on every such backend: when a lost place
// joins again, when a try is refused, which errors are tried again and
// how often, when the wait is over, what Acquire returns.
//
// The Keeper supplies everything users see: the Lease, its Context
// cancelled with cause ErrLockLost on loss, Done, Err, Unlock / Extend /
// Verify driving the grant's GrantOps, the local deadline on the monotonic
// clock (the grant is assumed lost once Sent + TTL minus Drift has passed
// without a renewal), re-entry by the same owner, the observe events and the
// log lines. The backend keeps a renewed grant alive by calling
// Hold.Renewed after each successful renewal (or Keeper.RenewSession for
// every grant of one session), and reports a loss it learns of (its session
// ended, the key is gone) with Hold.Lose or Keeper.LoseSession.
//
// The types users see (Lease, Option, Info and the sentinel errors) are
// defined here and re-exported by package dlock, so that every backend's
// Lease is one type. dlocktest.Run is the behaviour a backend must pass.
package seam
