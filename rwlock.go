package dlock

import (
	"context"
	"sync"
	"time"

	"github.com/dlockgo/dlock/internal/ids"
	"github.com/dlockgo/dlock/seam"
)

var (
	rwReadAcquire  = withLibs("rw_read_acquire.lua", "fence.lua", "lib.lua", "rw_lib.lua")
	rwReadRelease  = withLibs("rw_read_release.lua", "lib.lua", "rw_lib.lua")
	rwReadExtend   = withLibs("rw_read_extend.lua", "lib.lua")
	rwWriteAcquire = withLibs("rw_write_acquire.lua", "fence.lua", "lib.lua", "rw_lib.lua")
	rwWriteRelease = plain("rw_write_release.lua")
	rwWriteLeave   = withLibs("rw_write_leave.lua", "lib.lua", "rw_lib.lua")
)

// rwInspector is an RWLock's answer to Inspect.
var rwInspector = inspector{withLibs("rw_inspect.lua", "lib.lua", "rw_lib.lua", "inspect_lib.lua"), func(c *Client, name string) []string {
	k := (&RWLock{c: c, name: name}).keys()
	return []string{k.lock, k.fence, k.readers, k.holds, k.writers}
}}

// RWLock is a read-write lock: any number of readers share it, a writer
// holds it alone.
//
//   - Both sides are reentrant through the Lease's Context, like Lock.
//   - The writer may also take the read side (downgrade: take the read lock
//     under the write Lease's Context, then unlock the write lock, and go on
//     reading under the read Lease's Context, with no writer getting in
//     between). The reverse, read to write, is refused at once with
//     ErrUpgrade: two readers upgrading would wait for each other forever.
//   - Every read hold has its own lease (and watchdog): a reader that crashed
//     blocks writers only until its own lease runs out, whatever the other
//     readers do.
//   - Writer preference: once a writer waits, new readers wait behind it, so
//     a steady stream of readers cannot starve writers. Owners that already
//     read may read again (re-entry), or a reader re-entering while a writer
//     waits would deadlock. Writers are not ordered among themselves (use a
//     FairLock for FIFO). A waiting writer refreshes its place like a
//     FairLock waiter (QueueTimeout); a writer that died stops holding back
//     readers once its timeout has passed.
//
// Every acquisition, read or write, takes a fencing token from the lock's one
// counter (a re-entry returns the holder's token).
type RWLock struct {
	c    *Client
	name string
	once sync.Once
	s    *rwSides
}

// RWLock returns the read-write lock called name. The name is checked by
// Acquire.
func (c *Client) RWLock(name string) *RWLock { return &RWLock{c: c, name: name} }

// Name returns the lock's name.
func (rw *RWLock) Name() string { return rw.name }

// ReadLock returns the read side: its Acquire takes a shared hold.
func (rw *RWLock) ReadLock() Locker { return readLock{rw} }

// WriteLock returns the write side: its Acquire takes the exclusive hold.
func (rw *RWLock) WriteLock() Locker { return writeLock{rw} }

type readLock struct{ rw *RWLock }

func (r readLock) Name() string { return r.rw.name }

// Acquire takes or re-enters the read side; see RWLock.
func (r readLock) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return r.rw.c.acquire(ctx, readShape(r), opts)
}

type writeLock struct{ rw *RWLock }

func (w writeLock) Name() string { return w.rw.name }

// Acquire takes or re-enters the write side; see RWLock.
func (w writeLock) Acquire(ctx context.Context, opts ...Option) (*Lease, error) {
	return w.rw.c.acquire(ctx, writeShape(w), opts)
}

// rwKeys are an RWLock's keys (see lua/rw_lib.lua).
type rwKeys struct {
	lockKeys
	readers, holds, writers string
}

func (rw *RWLock) keys() rwKeys {
	k := rw.c.keys(rw.name)
	return rwKeys{lockKeys: k, readers: k.lock + ":rw:readers", holds: k.lock + ":rw:holds", writers: k.lock + ":rw:writers"}
}

// rwSides is what both sides of one RWLock object share: its keys and the
// two shapes' specs, built on the first Acquire.
type rwSides struct {
	k           rwKeys
	read, write shapeSpec
}

func (rw *RWLock) sides() *rwSides {
	rw.once.Do(func() {
		k := rw.keys()
		rw.s = &rwSides{k: k}
		rw.s.read = shapeSpec{kind: "rw_read", name: rw.name, keys: k.lockKeys, wake: wakeShared, replicaAck: true, owned: true}
		rw.s.write = shapeSpec{kind: "rw_write", name: rw.name, keys: k.lockKeys, wake: wakeShared, replicaAck: true, owned: true, leave: rw.writeLeaveCall}
	})
	return rw.s
}

type readShape struct{ rw *RWLock }

func (s readShape) spec() *shapeSpec { return &s.rw.sides().read }

func (s readShape) acquireCall(a *attempt) scriptCall {
	k := &s.rw.sides().k
	return rwReadAcquire.call([]string{k.lock, k.fence, k.readers, k.holds, k.writers},
		a.owner, a.op, ms(a.ttl), a.meta, a.clockArg())
}

func (s readShape) holdID(a *attempt) string { return s.rw.sides().k.readers + "|" + a.owner }

func (s readShape) ops(a *attempt) holdOps {
	return readOps{c: s.rw.c, k: &s.rw.sides().k, owner: a.owner}
}

// readOps drives one owner's read hold.
type readOps struct {
	c     *Client
	k     *rwKeys
	owner string
}

func (o readOps) renewCalls(ttl time.Duration) []scriptCall {
	return []scriptCall{rwReadExtend.call([]string{o.k.readers, o.k.holds}, o.owner, ms(ttl))}
}

func (o readOps) extend(ctx context.Context, ttl time.Duration) (bool, error) {
	n, err := o.c.callSettled(ctx, o.renewCalls(ttl)[0])
	return n == 1, err
}

func (o readOps) releaseCall() scriptCall {
	return rwReadRelease.call([]string{o.k.readers, o.k.holds}, o.owner, ids.Op(), o.k.wake)
}

func (o readOps) releaseCalls() []scriptCall { return []scriptCall{o.releaseCall()} }

func (o readOps) release(ctx context.Context) (seam.Released, error) {
	n, err := o.c.callSettled(ctx, o.releaseCall())
	return seam.Released(n), err
}

func (o readOps) verify(ctx context.Context) (bool, error) {
	n, err := o.c.callInt(ctx, zsetLive.call([]string{o.k.readers}, o.owner))
	return n == 1, err
}

type writeShape struct{ rw *RWLock }

func (s writeShape) spec() *shapeSpec { return &s.rw.sides().write }

func (s writeShape) acquireCall(a *attempt) scriptCall {
	k := &s.rw.sides().k
	return rwWriteAcquire.call([]string{k.lock, k.fence, k.readers, k.holds, k.writers},
		a.owner, a.op, ms(a.ttl), a.meta, a.clockArg(), ms(a.queue), a.c.argClient)
}

func (rw *RWLock) writeLeaveCall(a *attempt) scriptCall {
	k := &rw.sides().k
	return rwWriteLeave.call([]string{k.lock, k.readers, k.holds, k.writers}, a.owner, a.op, a.queueMember(), k.wake)
}

func (s writeShape) holdID(a *attempt) string { return s.rw.sides().k.lock + "|" + a.owner }

func (s writeShape) ops(a *attempt) holdOps {
	return &keyOps{c: &s.rw.c.conn, keys: s.rw.sides().k.lockKeys, holder: a.owner, releaseScript: rwWriteRelease, extendScript: lockExtend, owned: lockOwned, releaseOp: true}
}
