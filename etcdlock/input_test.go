package etcdlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/internal/freeport"
	"github.com/dlockgo/dlock/seam"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestNewBadInput(t *testing.T) {
	cli := etcdClient(t)
	for _, tc := range []struct {
		name string
		cli  *clientv3.Client
		cfg  []Config
		want error
	}{
		{"nil client", nil, nil, dlock.ErrInvalidArgument},
		{"negative TTL", cli, []Config{{TTL: -time.Second}}, dlock.ErrInvalidDuration},
		{"short TTL", cli, []Config{{TTL: 500 * time.Millisecond}}, dlock.ErrInvalidDuration},
		{"long label", cli, []Config{{Label: strings.Repeat("x", 257)}}, dlock.ErrInvalidArgument},
		{"two Configs", cli, []Config{{}, {}}, dlock.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cli, tc.cfg...)
			if c != nil {
				c.Close()
				t.Fatal("New returned a Client")
			}
			dlocktest.CheckError(t, err, tc.want, "dlock: new client: ")
		})
	}
	c, err := New(cli, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.TTL() != DefaultTTL || c.prefix != DefaultPrefix {
		t.Errorf("the zero Config: TTL %v, prefix %q; want the defaults", c.TTL(), c.prefix)
	}
}

func TestAcquireBadInput(t *testing.T) {
	admin := etcdClient(t)
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	n := lockName(t)
	lockers := map[string]dlock.Locker{
		"mutex": c.Mutex(n), "lock": c.Lock(n), "read": c.RWLock(n).ReadLock(), "write": c.RWLock(n).WriteLock(), "semaphore": c.Semaphore(n, 2),
	}
	for kind, l := range lockers {
		for _, o := range []dlock.Option{dlock.LeaseTime(0), dlock.LeaseTime(-time.Second), dlock.Wait(-time.Second)} {
			if _, err := l.Acquire(ctx, o); !errors.Is(err, dlock.ErrInvalidDuration) {
				t.Errorf("%s: %v, want ErrInvalidDuration", kind, err)
			}
		}
		if _, err := l.Acquire(ctx, dlock.ReplicaAck(1, time.Second)); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s with ReplicaAck: %v, want ErrInvalidArgument", kind, err)
		}
	}
	for _, name := range []string{"", strings.Repeat("x", seam.MaxNameLen+1)} {
		if _, err := c.Semaphore(name, 1).Acquire(ctx); !errors.Is(err, dlock.ErrInvalidName) {
			t.Errorf("semaphore named %d bytes: %v, want ErrInvalidName", len(name), err)
		}
		if _, err := c.RWLock(name).WriteLock().Acquire(ctx); !errors.Is(err, dlock.ErrInvalidName) {
			t.Errorf("write lock named %d bytes: %v, want ErrInvalidName", len(name), err)
		}
	}
	for _, p := range []int{0, -1} {
		if _, err := c.Semaphore(n, p).Acquire(ctx); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), n) {
			t.Errorf("semaphore of %d permits: %v, want ErrInvalidArgument naming the lock", p, err)
		}
	}
	resp, err := admin.Get(ctx, c.prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range keysIn(t, admin, c.prefix) {
		if strings.Contains(kv.key, n) {
			t.Errorf("bad input left a key: %s (%d keys)", kv.key, resp.Count)
		}
	}
	if c.sessionID() != 0 {
		t.Error("bad input granted a session lease")
	}
}

// One error format on every backend: dlock: <op> <shape> "<name>": <reason>.
func TestErrorFormat(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	n := lockName(t)
	held, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = newClient(t).Mutex(n).Acquire(ctx, dlock.Wait(0))
	if want := `dlock: acquire mutex "` + n + `": not acquired`; err == nil || err.Error() != want {
		t.Errorf("a refusal: %v, want %s", err, want)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	err = held.Unlock(ctx)
	if want := `dlock: unlock mutex "` + n + `": not held`; err == nil || err.Error() != want {
		t.Errorf("a second Unlock: %v, want %s", err, want)
	}
	_, err = c.Semaphore(n, 0).Acquire(ctx)
	if want := `dlock: acquire semaphore "` + n + `": invalid argument: 0 permits (want at least 1)`; err == nil || err.Error() != want {
		t.Errorf("a bad permit count: %v, want %s", err, want)
	}
}

func TestExtend(t *testing.T) {
	admin := etcdClient(t)
	c := newClient(t, Config{TTL: 3 * time.Second})
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	l, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 0); !errors.Is(err, dlock.ErrInvalidDuration) {
		t.Errorf("Extend(0): %v, want ErrInvalidDuration", err)
	}
	if err := l.Extend(ctx, time.Minute); !errors.Is(err, dlock.ErrInvalidDuration) {
		t.Errorf("Extend beyond the session TTL: %v, want ErrInvalidDuration", err)
	}
	if err := l.Extend(ctx, 2*time.Second); err != nil {
		t.Errorf("Extend within the session TTL: %v", err)
	}
	if err := l.Verify(ctx); err != nil {
		t.Fatalf("after the Extends: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// A lease of its own moves to a longer one.
	f, err := c.Mutex(n).Acquire(ctx, dlock.LeaseTime(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	before := keysIn(t, admin, c.dir("mutex", n))
	if len(before) != 1 || before[0].lease == c.sessionID() {
		t.Fatalf("a LeaseTime grant is on the session lease: %v", before)
	}
	if err := f.Extend(ctx, 6*time.Second); err != nil {
		t.Fatal(err)
	}
	after := keysIn(t, admin, c.dir("mutex", n))
	if len(after) != 1 || after[0].lease == before[0].lease || after[0].rev != f.Token() {
		t.Fatalf("Extend beyond the lease: keys %v, were %v", after, before)
	}
	if leaseAlive(t, admin, before[0].lease) {
		t.Error("the old lease outlived the move")
	}
	select {
	case <-f.Done():
		t.Fatalf("lost after an Extend: %v", f.Err())
	case <-time.After(3 * time.Second): // past the first lease
	}
	if err := f.Verify(ctx); err != nil {
		t.Fatal(err)
	}
	if err := f.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestIsOwner(t *testing.T) {
	admin := etcdClient(t)
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	n := lockName(t)
	guarded := func(l *dlock.Lease) bool {
		t.Helper()
		resp, err := admin.Txn(ctx).If(IsOwner(l)).Then(clientv3.OpPut("guarded/"+n, "x")).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if guarded(nil) {
		t.Fatal("IsOwner(nil) held")
	}
	l, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !guarded(l) {
		t.Fatal("IsOwner of the holder did not hold")
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if guarded(l) {
		t.Fatal("IsOwner held after Unlock")
	}
	// A later grant of the same lock does not make the old guard hold.
	l2, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Unlock(ctx)
	if guarded(l) || !guarded(l2) {
		t.Fatal("IsOwner: the old lease's guard held, or the new one's did not")
	}
}

// An etcd nobody answers on: waiters end by their wait or ctx, never hang,
// never panic.
func TestUnreachableCluster(t *testing.T) {
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c, err := New(cli, Config{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	start := time.Now()
	if _, err := c.Mutex(n).Acquire(ctx, dlock.Wait(300*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("Wait(300ms): %v, want ErrNotAcquired", err)
	}
	if _, err := c.Mutex(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("Wait(0): %v, want ErrNotAcquired", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.RWLock(n).ReadLock().Acquire(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ctx deadline: %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the three attempts took %v", d)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex(n).Acquire(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}

// Lock names that are prefixes of one another are different locks.
func TestNamesDoNotNest(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	n := lockName(t)
	for _, name := range []string{n, n + "/", n + "/3:abc", "1:" + n} {
		l, err := c.Mutex(name).Acquire(ctx, dlock.Wait(0))
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		defer l.Unlock(ctx)
	}
}

// A nil context is bad input: an error wrapping ErrInvalidArgument, no
// panic.
func TestNilContext(t *testing.T) {
	c := newClient(t)
	var nilCtx context.Context
	for _, lk := range []dlock.Locker{c.Mutex("nil"), c.Lock("nil"), c.RWLock("nil").ReadLock(), c.RWLock("nil").WriteLock(), c.Semaphore("nil-s", 2), c.MultiLock("nil-a", "nil-b")} {
		if _, err := lk.Acquire(nilCtx); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%T.Acquire(nil): %v, want ErrInvalidArgument", lk, err)
		}
	}
	if _, err := c.Inspect(nilCtx, "nil"); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Inspect(nil): %v", err)
	}
}
