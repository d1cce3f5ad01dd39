package dlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/observe"
	"github.com/dlockgo/dlock/seam"

	"github.com/dlockgo/dlock"
)

// Bad input to every shape of the family gets a clear error and writes
// nothing to Redis.
func TestFamilyBadInput(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	c2, c3 := newClient(t, rdb), newClient(t, rdb)
	closed, err := dlock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	_ = closed.Close()
	ctx := context.Background()
	long := strings.Repeat("x", seam.MaxNameLen+1)
	cases := []struct {
		name string
		lk   dlock.Locker
		opts []dlock.Option
		want error
	}{
		{"fair: empty name", c.FairLock(""), nil, dlock.ErrInvalidName},
		{"fair: long name", c.FairLock(long), nil, dlock.ErrInvalidName},
		{"fair: short queue timeout", c.FairLock("f"), []dlock.Option{dlock.QueueTimeout(time.Millisecond)}, dlock.ErrInvalidDuration},
		{"fair: negative queue timeout", c.FairLock("f"), []dlock.Option{dlock.QueueTimeout(-time.Second)}, dlock.ErrInvalidDuration},
		{"read: empty name", c.RWLock("").ReadLock(), nil, dlock.ErrInvalidName},
		{"write: long name", c.RWLock(long).WriteLock(), nil, dlock.ErrInvalidName},
		{"write: zero lease", c.RWLock("rw").WriteLock(), []dlock.Option{dlock.LeaseTime(0)}, dlock.ErrInvalidDuration},
		{"multi: no names", c.MultiLock(), nil, dlock.ErrInvalidArgument},
		{"multi: duplicate names", c.MultiLock("a", "b", "a"), nil, dlock.ErrInvalidArgument},
		{"multi: empty member", c.MultiLock("a", ""), nil, dlock.ErrInvalidName},
		{"redlock: no clients", dlock.NewRedLock("r"), nil, dlock.ErrInvalidArgument},
		{"redlock: 2 clients", dlock.NewRedLock("r", c, c2), nil, dlock.ErrInvalidArgument},
		{"redlock: nil client", dlock.NewRedLock("r", c, nil, c3), nil, dlock.ErrInvalidArgument},
		{"redlock: nil first client", dlock.NewRedLock("r", nil, c2, c3), nil, dlock.ErrInvalidArgument},
		{"redlock: client twice", dlock.NewRedLock("r", c, c2, c), nil, dlock.ErrInvalidArgument},
		{"redlock: closed client", dlock.NewRedLock("r", c, c2, closed), nil, dlock.ErrClosed},
		{"redlock: empty name", dlock.NewRedLock("", c, c2, c3), nil, dlock.ErrInvalidName},
		{"redlock: ReplicaAck", dlock.NewRedLock("r", c, c2, c3), []dlock.Option{dlock.ReplicaAck(1, time.Second)}, dlock.ErrInvalidArgument},
		{"semaphore: 0 permits", c.Semaphore("s", 0), nil, dlock.ErrInvalidArgument},
		{"semaphore: -1 permits", c.Semaphore("s", -1), nil, dlock.ErrInvalidArgument},
		{"semaphore: empty name", c.Semaphore("", 3), nil, dlock.ErrInvalidName},
	}
	for _, tc := range cases {
		if _, err := tc.lk.Acquire(ctx, tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	sem := c.Semaphore("s", 5)
	for _, k := range []int{0, -1, 6} {
		if _, err := sem.AcquireN(ctx, k); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("AcquireN(%d) of 5: %v", k, err)
		}
	}
	if err := c.Semaphore("", 5).Release(ctx, "0123456789abcdef0123456789abcdef"); !errors.Is(err, dlock.ErrInvalidName) {
		t.Errorf("release on an empty name: %v", err)
	}
	if err := sem.Release(ctx, "0123456789abcdef0123456789abcdef"); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("release of an unknown permit: %v", err)
	}
	if n, _ := rdb.DBSize(ctx).Result(); n != 0 {
		keys, _ := rdb.Keys(ctx, "*").Result()
		t.Fatalf("bad input wrote %d keys: %v", n, keys)
	}
}

// A key of another type under a family shape's name: ErrWrongType, and the
// key is left alone.
func TestFamilyWrongType(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	ctx := context.Background()
	rdb.Set(ctx, "dlock:{s}", "someone else's string", 0)
	rdb.HSet(ctx, "dlock:{h}", "field", "value")
	for _, tc := range []struct {
		what string
		lk   dlock.Locker
	}{
		{"fair on a string", c.FairLock("s")},
		{"fair on a foreign hash", c.FairLock("h")},
		{"read on a string", c.RWLock("s").ReadLock()},
		{"write on a foreign hash", c.RWLock("h").WriteLock()},
		{"multi with a string member", c.MultiLock("a", "s")},
		{"semaphore on a hash", c.Semaphore("h", 2)},
	} {
		if _, err := tc.lk.Acquire(ctx, dlock.Wait(100*time.Millisecond)); !errors.Is(err, dlock.ErrWrongType) {
			t.Errorf("%s: %v, want ErrWrongType", tc.what, err)
		}
	}
	if v, _ := rdb.Get(ctx, "dlock:{s}").Result(); v != "someone else's string" {
		t.Fatalf("string changed to %q", v)
	}
	if m, _ := rdb.HGetAll(ctx, "dlock:{h}").Result(); len(m) != 1 || m["field"] != "value" {
		t.Fatalf("hash changed to %v", m)
	}
	if n, _ := rdb.Exists(ctx, "dlock:{a}").Result(); n != 0 {
		t.Fatal("a multi-lock with a bad member took another member")
	}
}

// Each shape's lease is lost within one renewal of its keys vanishing.
func TestFamilyLostSignal(t *testing.T) {
	const timeout = 600 * time.Millisecond
	rdb := server(t)
	c := newClient(t, rdb, dlock.Config{TTL: timeout})
	ctx := context.Background()
	for _, tc := range []struct {
		shape string
		lk    dlock.Locker
		key   string
	}{
		{"fair", c.FairLock("lf"), "dlock:{lf}"},
		{"rw_read", c.RWLock("lr").ReadLock(), "dlock:{lr}:rw:readers"},
		{"rw_write", c.RWLock("lw").WriteLock(), "dlock:{lw}"},
		{"semaphore", c.Semaphore("ls", 3), "dlock:{ls}"},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			l, err := tc.lk.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(timeout / 2) // one renewal
			if err := l.Verify(ctx); err != nil {
				t.Fatalf("before: %v", err)
			}
			rdb.Del(ctx, tc.key)
			if !closedWithin(l.Done(), timeout/3+300*time.Millisecond) {
				t.Fatal("not lost within one renewal of the key vanishing")
			}
			if cause := context.Cause(l.Context()); !errors.Is(cause, dlock.ErrLockLost) {
				t.Fatalf("cause %v", cause)
			}
			if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
				t.Fatalf("unlock: %v", err)
			}
		})
	}
}

// A FairLock held through a Client that is closed goes to the next waiter
// at once.
func TestFamilyCloseHandsOver(t *testing.T) {
	rdb := server(t)
	a, err := dlock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	b := newClient(t, rdb)
	ctx := context.Background()
	if _, err := a.FairLock("close").Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		l, err := b.FairLock("close").Acquire(ctx, dlock.Wait(10*time.Second))
		if err == nil {
			err = l.Unlock(ctx)
		}
		got <- err
	}()
	eventually(t, 10*time.Second, "waiter queued", func() bool { return zcard(rdb, fairQueue("close")) == 1 })
	closed := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if d := time.Since(closed); d > 2*time.Second {
		t.Fatalf("waiter got the lock %v after Close (30s lease: not handed over)", d)
	}
}

// recorder is an Observer that keeps the shapes it saw.
type recorder struct {
	mu       sync.Mutex
	acquired []string
	tokens   []int64 // of the acquisitions
	released []string
}

func (r *recorder) ObserveAcquire(e observe.AcquireEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Result == observe.Acquired {
		r.acquired = append(r.acquired, e.Shape)
		r.tokens = append(r.tokens, e.Token)
	}
}

func (r *recorder) ObserveRelease(e observe.ReleaseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, e.Shape)
}
func (r *recorder) ObserveLost(observe.LostEvent)       {}
func (r *recorder) ObserveRenewal(observe.RenewalEvent) {}

// Events carry the family's shape names, and an acquisition its token.
func TestFamilyObserverShapes(t *testing.T) {
	rdb := server(t)
	rec := &recorder{}
	c := newClient(t, rdb, dlock.Config{Observer: rec})
	c2, c3 := newClient(t, rdb, dlock.Config{Prefix: "n2:"}), newClient(t, rdb, dlock.Config{Prefix: "n3:"})
	ctx := context.Background()
	var tokens []int64
	for _, lk := range []dlock.Locker{
		c.FairLock("o"), c.RWLock("o").ReadLock(), c.RWLock("o2").WriteLock(),
		c.MultiLock("o3", "o4"), dlock.NewRedLock("o5", c, c2, c3), c.Semaphore("o6", 2),
	} {
		l, err := lk.Acquire(ctx, dlock.Wait(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, l.Token())
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"fair", "rw_read", "rw_write", "multi", "redlock", "semaphore"}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !slices.Equal(rec.acquired, want) || !slices.Equal(rec.released, want) {
		t.Fatalf("acquired %v, released %v, want %v", rec.acquired, rec.released, want)
	}
	if !slices.Equal(rec.tokens, tokens) {
		t.Fatalf("acquire events' tokens %v, the Leases' %v", rec.tokens, tokens)
	}
}
