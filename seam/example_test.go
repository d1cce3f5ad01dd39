package seam_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlockgo/dlock/seam"
)

// A whole backend on the seam: a lock service of one process (a map), with
// the Lease, the loss on the client's clock, errors and events all from the
// Keeper. docs/ARCHITECTURE.md ("Adding a backend") walks through it.

// store is the lock service: for each name, who holds it until when, and
// the last token granted.
type store struct {
	mu    sync.Mutex
	last  int64
	holds map[string]storeHold
}

type storeHold struct {
	id    string
	until time.Time
}

// grant grants name to id for ttl if it is free (or its holder's time ran
// out), with a token above every one granted before.
func (s *store) grant(name, id string, ttl time.Duration) (int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.holds[name]; ok && time.Now().Before(h.until) {
		return 0, false
	}
	s.last++
	s.holds[name] = storeHold{id, time.Now().Add(ttl)}
	return s.last, true
}

// ops is the backend's part for one grant: release, extend, verify, each
// compare-then-act on the holder id.
type ops struct {
	s        *store
	name, id string
}

func (o ops) Release(context.Context) (seam.Released, error) {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	if h, ok := o.s.holds[o.name]; !ok || h.id != o.id || time.Now().After(h.until) {
		return seam.ReleasedNotOurs, nil
	}
	delete(o.s.holds, o.name)
	return seam.ReleasedFree, nil
}

func (o ops) Extend(_ context.Context, ttl time.Duration) (bool, error) {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	if h, ok := o.s.holds[o.name]; !ok || h.id != o.id || time.Now().After(h.until) {
		return false, nil
	}
	o.s.holds[o.name] = storeHold{o.id, time.Now().Add(ttl)}
	return true, nil
}

func (o ops) Verify(context.Context) (bool, error) {
	o.s.mu.Lock()
	defer o.s.mu.Unlock()
	h, ok := o.s.holds[o.name]
	return ok && h.id == o.id && time.Now().Before(h.until), nil
}

// client is one backend client: its Keeper owns every Lease it hands out.
type client struct {
	s *store
	k *seam.Keeper[ops]
}

// acquire grants a mutex on name: one try, then a poll every 5 ms while
// Wait allows.
func (c *client) acquire(ctx context.Context, name string, opts ...seam.Option) (l *seam.Lease, err error) {
	// The input checked (ctx, name, options: Portable refuses the Redis-only
	// ReplicaAck), the Observer's event (a tracer's span) begun.
	call, err := c.k.Begin(ctx, seam.Request{Shape: "mutex", Name: name}, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = call.End(l, err) }() // the event; the error named once
	o := call.Options                         // Wait, Lease, QueueTimeout, OnLost, MaxHold
	ttl := o.Lease
	if ttl == 0 {
		ttl = time.Second // this backend keeps no lease alive: a default fixed lease
	}
	id := rand.Text()
	var deadline <-chan time.Time
	if o.Wait >= 0 {
		deadline = time.After(o.Wait)
	}
	for {
		sent := time.Now() // before the request: the lease runs from here on the client's clock
		if token, ok := c.s.grant(name, id, ttl); ok {
			return c.k.Lease(ctx, seam.Grant[ops]{
				Shape: "mutex", Name: name, ID: id, Token: token, Sent: sent, TTL: ttl,
				MaxHold: o.MaxHold, OnLost: o.OnLost, Ops: ops{c.s, name, id},
			})
		}
		select {
		case <-call.Store.Done(): // the store's requests run under call.Store
			return nil, call.Store.Err()
		case <-deadline:
			return nil, seam.ErrNotAcquired
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func Example() {
	s := &store{holds: map[string]storeHold{}}
	a := &client{s, seam.NewKeeper[ops](nil, nil)}
	b := &client{s, seam.NewKeeper[ops](nil, nil)}
	defer a.k.Close(context.Background(), nil)
	defer b.k.Close(context.Background(), nil)
	ctx := context.Background()

	la, err := a.acquire(ctx, "orders/42", seam.LeaseTime(50*time.Millisecond))
	fmt.Println("A:", la.Token(), err)
	_, err = b.acquire(ctx, "orders/42", seam.Wait(0))
	fmt.Println("B:", err)

	<-la.Done() // A's lease ran out on A's clock
	fmt.Println("A lost:", errors.Is(la.Err(), seam.ErrLockLost), context.Cause(la.Context()) != nil)
	lb, err := b.acquire(ctx, "orders/42", seam.Wait(time.Second))
	fmt.Println("B:", lb.Token(), err)
	fmt.Println("A unlocks:", errors.Is(la.Unlock(ctx), seam.ErrLockLost))
	fmt.Println("B unlocks:", lb.Unlock(ctx))
	// Output:
	// A: 1 <nil>
	// B: dlock: acquire mutex "orders/42": not acquired
	// A lost: true true
	// B: 2 <nil>
	// A unlocks: true
	// B unlocks: <nil>
}
