package faults_test

import (
	"context"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/redis/go-redis/v9"
)

// shape is one lock shape under test: the holder's locker, a contender's
// locker that conflicts with it, and where Redis keeps the holder's expiry.
type shape struct {
	name      string
	holder    func(c *dlock.Client, n string) dlock.Locker
	contender func(c *dlock.Client, n string) dlock.Locker
	// expiry reads the server-side expiry of l (Unix ms); false if the
	// hold is not in Redis.
	expiry func(ctx context.Context, rdb *redis.Client, n string, l *dlock.Lease) (int64, bool)
}

// ownedExpiry returns the PEXPIRETIME of a lock key (a Mutex string
// "token[mark]|..." or a lock hash with owner field o) if ARGV[1] holds it,
// -3 if someone else does, -2 if there is no such key.
var ownedExpiry = redis.NewScript(`
local t = redis.call('TYPE', KEYS[1]).ok
local owner
if t == 'string' then
  owner = string.match(redis.call('GET', KEYS[1]), '^([^|]*)|')
elseif t == 'hash' then
  owner = redis.call('HGET', KEYS[1], 'o')
else
  return -2
end
if not owner or string.sub(owner, 1, #ARGV[1]) ~= ARGV[1] then
  return -3
end
return redis.call('PEXPIRETIME', KEYS[1])`)

func keyExpiry(keys ...string) func(ctx context.Context, rdb *redis.Client, n string, l *dlock.Lease) (int64, bool) {
	return func(ctx context.Context, rdb *redis.Client, n string, l *dlock.Lease) (int64, bool) {
		var min int64
		for _, k := range keys {
			v, err := ownedExpiry.Run(ctx, rdb, []string{"dlock:{" + n + k + "}"}, l.ID()).Int64()
			if err != nil || v < 0 {
				return 0, false
			}
			if min == 0 || v < min {
				min = v
			}
		}
		return min, true
	}
}

func zsetExpiry(suffix string) func(ctx context.Context, rdb *redis.Client, n string, l *dlock.Lease) (int64, bool) {
	return func(ctx context.Context, rdb *redis.Client, n string, l *dlock.Lease) (int64, bool) {
		v, err := rdb.ZScore(ctx, "dlock:{"+n+"}"+suffix, l.ID()).Result()
		if err != nil {
			return 0, false
		}
		return int64(v), true
	}
}

// shapes is every Redis shape with a conflicting contender.
var shapes = []shape{
	{name: "Mutex",
		holder:    func(c *dlock.Client, n string) dlock.Locker { return c.Mutex(n) },
		contender: func(c *dlock.Client, n string) dlock.Locker { return c.Mutex(n) },
		expiry:    keyExpiry("")},
	{name: "Lock",
		holder:    func(c *dlock.Client, n string) dlock.Locker { return c.Lock(n) },
		contender: func(c *dlock.Client, n string) dlock.Locker { return c.Lock(n) },
		expiry:    keyExpiry("")},
	{name: "FairLock",
		holder:    func(c *dlock.Client, n string) dlock.Locker { return c.FairLock(n) },
		contender: func(c *dlock.Client, n string) dlock.Locker { return c.FairLock(n) },
		expiry:    keyExpiry("")},
	{name: "RWLock-read",
		holder:    func(c *dlock.Client, n string) dlock.Locker { return c.RWLock(n).ReadLock() },
		contender: func(c *dlock.Client, n string) dlock.Locker { return c.RWLock(n).WriteLock() },
		expiry:    zsetExpiry(":rw:readers")},
	{name: "RWLock-write",
		holder:    func(c *dlock.Client, n string) dlock.Locker { return c.RWLock(n).WriteLock() },
		contender: func(c *dlock.Client, n string) dlock.Locker { return c.RWLock(n).WriteLock() },
		expiry:    keyExpiry("")},
	{name: "Semaphore",
		holder:    func(c *dlock.Client, n string) dlock.Locker { return c.Semaphore(n, 1) },
		contender: func(c *dlock.Client, n string) dlock.Locker { return c.Semaphore(n, 1) },
		expiry:    zsetExpiry("")},
	{name: "MultiLock",
		holder:    func(c *dlock.Client, n string) dlock.Locker { return c.MultiLock(n+".a", n+".b") },
		contender: func(c *dlock.Client, n string) dlock.Locker { return c.MultiLock(n+".b", n+".a") },
		expiry: func(ctx context.Context, rdb *redis.Client, n string, l *dlock.Lease) (int64, bool) {
			var min int64
			for _, m := range []string{n + ".a", n + ".b"} {
				v, ok := keyExpiry("")(ctx, rdb, m, l)
				if !ok {
					return 0, false
				}
				if min == 0 || v < min {
					min = v
				}
			}
			return min, true
		}},
}

// expiryWatch follows the server-side expiry of one hold, keeping the
// latest value seen: the moment from which the server could grant the lock
// to someone else.
type expiryWatch struct {
	read func(ctx context.Context) (int64, bool)

	mu     sync.Mutex
	last   int64
	stop   chan struct{}
	done   chan struct{}
	closed bool
}

func watchExpiry(read func(ctx context.Context) (int64, bool)) *expiryWatch {
	w := &expiryWatch{read: read, stop: make(chan struct{}), done: make(chan struct{})}
	w.Sample()
	go func() {
		defer close(w.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.Sample()
			}
		}
	}()
	return w
}

// Sample reads the expiry now; false if it could not.
func (w *expiryWatch) Sample() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	v, ok := w.read(ctx)
	if ok {
		w.mu.Lock()
		if v > w.last {
			w.last = v
		}
		w.mu.Unlock()
	}
	return ok
}

// MustSample reads the expiry now, retrying for up to 2 s.
func (w *expiryWatch) MustSample() bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
		if w.Sample() {
			return true
		}
	}
	return false
}

// Last is the latest server-side expiry seen.
func (w *expiryWatch) Last() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.UnixMilli(w.last)
}

// Stop ends the watch; idempotent.
func (w *expiryWatch) Stop() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done
}
