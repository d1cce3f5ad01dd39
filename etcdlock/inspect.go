package etcdlock

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// Client implements election.Inspector, as every backend client does.
var _ interface {
	Inspect(context.Context, string) (dlock.Info, error)
} = (*Client)(nil)

// inspected are the shapes Inspect looks for, in the order it reports the
// first one that has keys (on etcd a Mutex, a Lock, an RWLock and a
// Semaphore of one name are different locks; a name normally has one).
var inspected = []string{"mutex", "lock", "rw", "semaphore"}

// Inspect reads the state of the lock called name without changing it, in
// one read of its directories plus one lease lookup per holder or waiter
// lease (their TTLs), with the meaning every backend gives dlock.Info:
//
//   - Shape: "mutex", "lock" (a MultiLock's members are Locks), "rw" or
//     "semaphore"; "" when no key is there.
//   - Holders: the oldest key of a Mutex or Lock (a MultiLock's key at the
//     head of one member holds it while it waits for the others); an
//     RWLock's writer with no older key, or its readers with no older
//     writer, and the readers of a downgrade; a Semaphore's Permits oldest
//     keys. ID is the first 8 characters of the owner (Lock, RWLock,
//     MultiLock) or of the key's random id (Mutex, Semaphore); Host, PID,
//     Label and Since come from the key's value (Since is when the key was
//     written: when its holder queued, or when it was granted after
//     waiting with QueueTimeout); Count is 1 (re-entries are counted by
//     the holding Client, not in etcd); Fence is the key's create revision;
//     TTL the remaining TTL of the key's lease, in whole seconds rounded
//     up (etcd counts lease TTLs in seconds).
//   - TTL: the lease of the holder of a Mutex, a Lock or an RWLock's
//     writer; -1 for readers and permits, which have their own (and when
//     free).
//   - Queue: every key that waits, in arrival order, with Mode "write" or
//     "read" for an RWLock. Deadline is the remaining TTL of a waiter's own
//     lease (QueueTimeout, rounded up like TTL), or -1 when its place lives
//     as long as its session.
//   - Permits: a Semaphore's count, from its count key (a free semaphore
//     whose count is kept is Shape "semaphore", not held).
//   - LastFence: the greatest token among the holders (etcd keeps no
//     counter: 0 when free; every later grant's token is greater anyway).
func (c *Client) Inspect(ctx context.Context, name string) (dlock.Info, error) {
	info := dlock.Info{Name: name, TTL: -1}
	if err := seam.CheckContext(ctx); err != nil {
		return info, seam.Wrap("inspect", "", name, err)
	}
	if err := seam.CheckName(name); err != nil {
		return info, seam.Wrap("inspect", "", name, err)
	}
	ops := make([]clientv3.Op, len(inspected), len(inspected)+1)
	for i, kind := range inspected {
		ops[i] = clientv3.OpGet(c.dir(kind, name), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	}
	resp, err := c.cli.Txn(ctx).Then(append(ops, clientv3.OpGet(c.permitsKey(name)))...).Commit()
	if err != nil {
		return info, seam.StoreErr(ctx, "inspect", "", name, err)
	}
	k := lockKeys{dirs: make([][]*mvccpb.KeyValue, len(inspected))}
	for i, r := range resp.Responses[:len(inspected)] {
		k.dirs[i] = r.GetResponseRange().GetKvs()
	}
	if kvs := resp.Responses[len(inspected)].GetResponseRange().GetKvs(); len(kvs) > 0 {
		k.permits = kvs[0]
	}
	var kvs []*mvccpb.KeyValue
	info.Shape, kvs = k.shape()
	var leases leaseSet
	leases.add(kvs)
	ttls, err := c.leaseTTLs(ctx, leases.ids, 1)
	if err != nil {
		return info, seam.StoreErr(ctx, "inspect", info.Shape, name, err)
	}
	return c.lockInfo(name, k, ttls), nil
}

// lockKeys are the keys of one lock as Inspect reads them: those of each
// shape's directory (in the order of inspected), oldest first (by create
// revision), and a Semaphore's count key (nil: none).
type lockKeys struct {
	dirs    [][]*mvccpb.KeyValue
	permits *mvccpb.KeyValue
}

// shape returns the shape Inspect reports of k's lock ("" none) and the
// keys of that shape.
func (k lockKeys) shape() (string, []*mvccpb.KeyValue) {
	for i, kvs := range k.dirs {
		if len(kvs) > 0 {
			return inspected[i], kvs
		}
	}
	if k.permits != nil { // a free semaphore: its count stays
		return "semaphore", nil
	}
	return "", nil
}

// lockInfo returns the Info of the lock called name whose keys are k (see
// Inspect), where ttls holds the remaining TTL of every lease of the keys
// of its shape (k.shape).
func (c *Client) lockInfo(name string, k lockKeys, ttls map[int64]time.Duration) dlock.Info {
	info := dlock.Info{Name: name, TTL: -1}
	var kvs []*mvccpb.KeyValue
	info.Shape, kvs = k.shape()
	var held, waiting []*mvccpb.KeyValue
	var modes map[*mvccpb.KeyValue]string
	switch info.Shape {
	case "mutex", "lock":
		held, waiting = kvs[:1], kvs[1:]
	case "semaphore":
		permits, _, counted := countOf(k.permits)
		info.Permits = permits
		if !counted { // keys of a version that kept no count
			info.Permits = parseValue(string(kvs[0].Value)).permits
		}
		n := min(max(info.Permits, 1), len(kvs))
		held, waiting = kvs[:n], kvs[n:]
	case "rw":
		held, waiting, modes = c.rwState(name, kvs)
	}
	for _, kv := range held {
		v := parseValue(string(kv.Value))
		h := dlock.Holder{ID: seam.ShortID(v.id), Host: v.host, PID: v.pid, Label: v.label, Since: v.written,
			Count: 1, Fence: kv.CreateRevision, Mode: modes[kv], TTL: max(ttls[kv.Lease], 0)}
		info.Holders = append(info.Holders, h)
		info.LastFence = max(info.LastFence, h.Fence)
		if h.Mode != "read" && info.Shape != "semaphore" {
			info.TTL = h.TTL
		}
	}
	info.Held = len(info.Holders) > 0
	for _, kv := range waiting {
		v := parseValue(string(kv.Value))
		w := dlock.Waiter{ID: seam.ShortID(v.id), Host: v.host, PID: v.pid, Label: v.label, Since: v.written, Mode: modes[kv], Deadline: -1}
		if v.queued {
			w.Deadline = max(ttls[kv.Lease], 0)
		}
		info.Queue = append(info.Queue, w)
	}
	return info
}

// rwState splits an RWLock's keys (oldest first) into holders and waiters
// (in arrival order), with each key's mode. A writer holds when no reader
// or writer key is older than it and no downgrade key but its own owner's
// is left (writers wait for every downgrade); a reader holds when no writer
// key is older than it; a downgrade's reader holds from its write.
func (c *Client) rwState(name string, kvs []*mvccpb.KeyValue) (held, waiting []*mvccpb.KeyValue, modes map[*mvccpb.KeyValue]string) {
	base := c.dir("rw", name)
	modes = make(map[*mvccpb.KeyValue]string, len(kvs))
	var downOwners []string
	for _, kv := range kvs {
		switch {
		case strings.HasPrefix(string(kv.Key), base+"w/"):
			modes[kv] = "write"
		case strings.HasPrefix(string(kv.Key), base+"d/"):
			modes[kv] = "read"
			downOwners = append(downOwners, parseValue(string(kv.Value)).id)
		default:
			modes[kv] = "read"
		}
	}
	olderKey, olderWriter := false, false
	for _, kv := range kvs {
		down := strings.HasPrefix(string(kv.Key), base+"d/")
		switch {
		case down:
			held = append(held, kv)
			continue
		case modes[kv] == "write":
			owner := parseValue(string(kv.Value)).id
			if !olderKey && allEqual(downOwners, owner) {
				held = append(held, kv)
			} else {
				waiting = append(waiting, kv)
			}
			olderWriter = true
		default:
			if !olderWriter {
				held = append(held, kv)
			} else {
				waiting = append(waiting, kv)
			}
		}
		olderKey = true
	}
	return held, waiting, modes
}

// allEqual reports whether every one of ss is s.
func allEqual(ss []string, s string) bool {
	for _, x := range ss {
		if x != s {
			return false
		}
	}
	return true
}

// leaseSet gathers the distinct leases of keys (0, no lease, left out).
type leaseSet struct {
	seen map[int64]bool
	ids  []int64
}

// add adds the leases of kvs not in s yet.
func (s *leaseSet) add(kvs []*mvccpb.KeyValue) {
	for _, kv := range kvs {
		if kv.Lease != 0 && !s.seen[kv.Lease] {
			if s.seen == nil {
				s.seen = make(map[int64]bool)
			}
			s.seen[kv.Lease] = true
			s.ids = append(s.ids, kv.Lease)
		}
	}
}

// leaseTTLs returns the remaining TTL of each of leases (distinct), read
// with up to workers LeaseTimeToLive calls at once; the first error ends
// the reads and is returned.
func (c *Client) leaseTTLs(ctx context.Context, leases []int64, workers int) (map[int64]time.Duration, error) {
	ttls := make(map[int64]time.Duration, len(leases))
	if len(leases) == 0 {
		return ttls, nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu    sync.Mutex
		first error
		read  int // the leases read
		wg    sync.WaitGroup
	)
	todo := make(chan int64)
	for range min(max(workers, 1), len(leases)) {
		wg.Go(func() {
			for id := range todo {
				r, err := c.cli.TimeToLive(ctx, clientv3.LeaseID(id))
				mu.Lock()
				switch {
				case err != nil && first == nil:
					first = err
					cancel()
				case err == nil:
					// etcd answers whole seconds, rounded down: the lease
					// ends within TTL + 1 s (and within the TTL it was
					// granted).
					ttl := time.Duration(0)
					if r.TTL >= 0 {
						ttl = time.Duration(min(r.TTL+1, max(r.GrantedTTL, r.TTL))) * time.Second
					}
					ttls[id] = ttl
					read++
				}
				mu.Unlock()
			}
		})
	}
feed:
	for _, id := range leases {
		select {
		case todo <- id:
		case <-ctx.Done():
			break feed
		}
	}
	close(todo)
	wg.Wait()
	switch {
	case first != nil:
		return nil, first
	case read < len(leases): // ctx ended before every lease was read
		return nil, context.Cause(ctx)
	}
	return ttls, nil
}
