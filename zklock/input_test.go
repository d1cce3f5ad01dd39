package zklock

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/seam"
	"github.com/go-zookeeper/zk"
)

func TestBadInput(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	sec := Config{TTL: time.Second}
	c := dial(t, 2*time.Second)
	bad := []struct {
		name string
		cfg  []Config
		want error
	}{
		{"relative prefix", []Config{{TTL: time.Second, Prefix: "x"}}, dlock.ErrInvalidArgument},
		{"prefix ending in /", []Config{{TTL: time.Second, Prefix: "/x/"}}, dlock.ErrInvalidArgument},
		{"prefix with //", []Config{{TTL: time.Second, Prefix: "//x"}}, dlock.ErrInvalidArgument},
		{"prefix with // inside", []Config{{TTL: time.Second, Prefix: "/a//b"}}, dlock.ErrInvalidArgument},
		{"long label", []Config{{TTL: time.Second, Label: strings.Repeat("l", 257)}}, dlock.ErrInvalidArgument},
		{"two Configs", []Config{sec, sec}, dlock.ErrInvalidArgument},
		{"short TTL", []Config{{TTL: 5 * time.Millisecond}}, dlock.ErrInvalidDuration},
		{"negative TTL", []Config{{TTL: -time.Second}}, dlock.ErrInvalidDuration},
	}
	for _, tc := range bad {
		t.Run("New/"+tc.name, func(t *testing.T) {
			_, err := New(c.Conn(), tc.cfg...)
			dlocktest.CheckError(t, err, tc.want, "dlock: new client: ")
		})
		t.Run("Dial/"+tc.name, func(t *testing.T) {
			d, err := Dial(ctx, server.Addr(), tc.cfg...)
			if d != nil {
				d.Close()
			}
			dlocktest.CheckError(t, err, tc.want, `dlock: dial zookeeper "`+server.Addr()+`": `)
		})
	}
	_, err := New(nil, sec)
	dlocktest.CheckError(t, err, dlock.ErrInvalidArgument, "dlock: new client: ")
	_, err = New(c.Conn())
	dlocktest.CheckError(t, err, dlock.ErrInvalidArgument, "dlock: new client: ")
	_, err = Dial(ctx, " , ")
	dlocktest.CheckError(t, err, dlock.ErrInvalidArgument, `dlock: dial zookeeper " , ": `)
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = Dial(short, "127.0.0.1:1", sec)
	dlocktest.CheckError(t, err, context.DeadlineExceeded, `dlock: dial zookeeper "127.0.0.1:1": `)
	cancel()
	// The zero Config is the defaults: DefaultTTL asked for, and
	// the server's maximum (20 ticks of the test server) granted.
	d, err := Dial(ctx, server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if got := d.TTL(); got != min(DefaultTTL, 20*tick) {
		t.Errorf("default session timeout %v", got)
	}
	d.Close()

	n := lockName(t)
	var nilCtx context.Context
	if _, err := c.Mutex(n).Acquire(nilCtx); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("nil ctx: %v", err)
	}
	for _, name := range []string{"", strings.Repeat("x", seam.MaxNameLen+1)} {
		if _, err := c.Mutex(name).Acquire(ctx); !errors.Is(err, dlock.ErrInvalidName) {
			t.Errorf("name of %d bytes: %v", len(name), err)
		}
	}
	if _, err := c.Semaphore(n, 0).Acquire(ctx); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("0 permits: %v", err)
	}
	if _, err := c.Mutex(n).Acquire(ctx, dlock.ReplicaAck(1, time.Second)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("ReplicaAck: %v", err)
	}
	if _, err := c.Mutex(n).Acquire(ctx, dlock.LeaseTime(-1)); !errors.Is(err, dlock.ErrInvalidDuration) {
		t.Errorf("negative lease: %v", err)
	}
	if got := members(t, c, "lock", n); len(got) != 0 {
		t.Errorf("bad input left nodes: %v", got)
	}

	// Extending past what one request proves of the session (5/12 of its
	// 2 s timeout: 833 ms) is refused; the lock stays held.
	l, err := c.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{time.Minute, time.Second} {
		if err := l.Extend(ctx, d); !errors.Is(err, dlock.ErrInvalidDuration) {
			t.Errorf("Extend(%v) with a 2s session: %v, want ErrInvalidDuration", d, err)
		}
	}
	if err := l.Extend(ctx, 800*time.Millisecond); err != nil {
		t.Errorf("Extend(800ms): %v", err)
	}
	if err := l.Verify(ctx); err != nil {
		t.Errorf("Verify: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	c.Close()
	if _, err := c.Mutex(n).Acquire(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestNames: any name of 1..MaxNameLen bytes is one lock of its own,
// whatever its characters.
func TestNames(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	a, b := dial(t, 2*time.Second), dial(t, 2*time.Second)
	p := lockName(t)
	names := []string{".", "..", p + "/a", p, p + "/a/..", p + "\x00\x01", p + " ü ☃ %2F", strings.Repeat("é", seam.MaxNameLen/2)}
	var held []*dlock.Lease
	for _, n := range names {
		l, err := a.Mutex(n).Acquire(ctx, dlock.Wait(0))
		if err != nil {
			t.Fatalf("%q: %v", n, err)
		}
		held = append(held, l)
	}
	for _, n := range names {
		if _, err := b.Mutex(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("%q held by a, b: %v", n, err)
		}
	}
	for _, l := range held {
		if err := l.Unlock(ctx); err != nil {
			t.Error(err)
		}
	}
}

func TestReadWriteOwner(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	c, other := dial(t, 2*time.Second), dial(t, 2*time.Second)
	n := lockName(t)
	rw := c.RWLock(n)
	r, err := rw.ReadLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rw.WriteLock().Acquire(r.Context()); !errors.Is(err, dlock.ErrUpgrade) {
		t.Fatalf("write under the owner's read: %v, want ErrUpgrade", err)
	}
	r.Unlock(ctx)
	w, err := rw.WriteLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The writer may read too; nobody else may.
	r2, err := rw.ReadLock().Acquire(w.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("read under the owner's write: %v", err)
	}
	if _, err := other.RWLock(n).ReadLock().Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another reader beside a writer: %v", err)
	}
	// The Mutex of the same name is excluded like a writer.
	if _, err := other.Mutex(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a mutex beside a writer: %v", err)
	}
	r2.Unlock(ctx)
	w.Unlock(ctx)
	l, err := other.Mutex(n).Acquire(ctx, dlock.Wait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock(ctx)
}

// TestLongFixedLease: a fixed lease longer than the session timeout is
// kept by the heartbeat and ends at its lease, its node deleted.
func TestLongFixedLease(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	a, b := dial(t, time.Second), dial(t, time.Second)
	n := lockName(t)
	lease := 3 * time.Second
	start := time.Now()
	l, err := a.Mutex(n).Acquire(ctx, dlock.LeaseTime(lease))
	if err != nil {
		t.Fatal(err)
	}
	l2, err := b.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Unlock(ctx)
	if d := time.Since(start); d < lease*9/10 {
		t.Fatalf("granted to the next after %v of a %v lease", d, lease)
	}
	select {
	case <-l.Done():
	default:
		t.Fatal("the first holder was not told its lease ended")
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after the lease: %v", err)
	}
}

// TestSessionClosedLosesLease: when the session ends (here: its connection
// is closed under the client), the lease is lost.
func TestSessionClosedLosesLease(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	conn, _, err := zk.Connect([]string{server.Addr()}, 2*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(conn, Config{TTL: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Mutex(lockName(t)).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close() // the caller's connection: its session ends
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("lease not lost after its session ended")
	}
	if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Err: %v", err)
	}
}

// TestReentrantConcurrent: acquisitions of one owner started at once
// while another owner holds the lock queue one node; once granted, the
// others re-enter with its token.
func TestReentrantConcurrent(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	c, other := dial(t, 2*time.Second), dial(t, 2*time.Second)
	n := lockName(t)
	first, err := other.Lock(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A lease's Context carries its owner: borrow one for the owner.
	ownerLease, err := c.Mutex(n + "-owner").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer ownerLease.Unlock(ctx)
	owner := ownerLease.Context()
	var wg sync.WaitGroup
	leases := make([]*dlock.Lease, 4)
	for i := range leases {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Lock(n).Acquire(owner, dlock.Wait(10*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			leases[i] = l
		}()
	}
	waitMembers(t, c, n, 2)
	time.Sleep(100 * time.Millisecond) // give stray waiters time to queue
	if got := members(t, c, "lock", n); len(got) != 2 {
		t.Fatalf("queue %v: one owner queued more than one node", got)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, l := range leases {
		if l == nil {
			t.FailNow()
		}
		if l.Token() != leases[0].Token() {
			t.Errorf("tokens %d and %d for one owner", l.Token(), leases[0].Token())
		}
	}
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got := members(t, c, "lock", n); len(got) != 0 {
		t.Fatalf("nodes left: %v", got)
	}
}

// TestRoot: clients with another Prefix keep their locks apart (the same
// name is another lock), "/" is a root like any, and the nodes live where
// the root says.
func TestRoot(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	n := lockName(t)
	def := dial(t, 2*time.Second)
	held, err := def.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(ctx)
	for _, root := range []string{"/", "/zklock-test/" + strings.ReplaceAll(n, "/", "_")} {
		c := dial(t, 2*time.Second, Config{Prefix: root})
		l, err := c.Mutex(n).Acquire(ctx, dlock.Wait(0))
		if err != nil {
			t.Fatalf("root %q: the name held under the default root: %v", root, err)
		}
		want := strings.TrimSuffix(root, "/") + "/lock/" + escape(n) + "/" + l.ID()
		if ok, _, err := def.conn.Exists(want); err != nil || !ok {
			t.Errorf("root %q: no node at %s (%v)", root, want, err)
		}
		if _, err := dial(t, 2*time.Second, Config{Prefix: root}).Mutex(n).Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("root %q: a second client of the root got the lock: %v", root, err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestErrorFormat: every backend writes an error one way: dlock: <op>
// <shape> "<name>": <reason>.
func TestErrorFormat(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	a, b := dial(t, 2*time.Second), dial(t, 2*time.Second)
	n := lockName(t)
	l, err := a.Mutex(n).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		locker dlock.Locker
		want   string
	}{
		{b.Mutex(n), `dlock: acquire mutex "` + n + `": not acquired`},
		{b.Lock(n), `dlock: acquire lock "` + n + `": not acquired`},
		{b.RWLock(n).WriteLock(), `dlock: acquire rw_write "` + n + `": not acquired`},
		{b.RWLock(n).ReadLock(), `dlock: acquire rw_read "` + n + `": not acquired`},
		{b.MultiLock(n), `dlock: acquire multi "` + n + `": not acquired`},
	} {
		if _, err := tc.locker.Acquire(ctx, dlock.Wait(0)); err == nil || err.Error() != tc.want {
			t.Errorf("%v, want %s", err, tc.want)
		}
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err == nil || err.Error() != `dlock: unlock mutex "`+n+`": not held` {
		t.Errorf("second Unlock: %v", err)
	}
	if _, err := b.Semaphore(n, 0).Acquire(ctx); err == nil || !strings.HasPrefix(err.Error(), `dlock: acquire semaphore "`+n+`": invalid argument: 0 permits`) {
		t.Errorf("0 permits: %v", err)
	}
}
