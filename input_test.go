package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/seam"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/redis/go-redis/v9"
)

func redisprocSentinelOptions() redisproc.SentinelOptions {
	return redisproc.SentinelOptions{Replicas: 1}
}

// Bad input gets a clear error, no panic, and no change in Redis.
func TestBadInput(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	ctx := context.Background()
	if _, err := dlock.New(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("New(nil): %v", err)
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": rdb.Options().Addr}})
	defer ring.Close()
	if _, err := dlock.New(ring); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("New(a Ring): %v, want ErrInvalidArgument (its pub/sub is sharded: a wake-up would not reach a waiter)", err)
	}
	for _, d := range []time.Duration{-time.Second, time.Microsecond} {
		if _, err := dlock.New(rdb, dlock.Config{TTL: d}); !errors.Is(err, dlock.ErrInvalidDuration) {
			t.Fatalf("watchdog timeout %v: %v", d, err)
		}
	}
	for _, cfg := range []dlock.Config{{RenewBatch: -1}, {Label: strings.Repeat("l", 257)}} {
		if _, err := dlock.New(rdb, cfg); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("%+v: %v", cfg, err)
		}
	}
	if _, err := dlock.New(rdb, dlock.Config{}, dlock.Config{}); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("two Configs: %v", err)
	}
	if _, err := dlock.New(rdb, dlock.Config{Prefix: "a{b"}); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Fatalf("brace prefix: %v", err)
	}
	cases := []struct {
		name string
		lk   dlock.Locker
		opts []dlock.Option
		want error
	}{
		{"empty name", c.Lock(""), nil, dlock.ErrInvalidName},
		{"long name", c.Mutex(strings.Repeat("x", seam.MaxNameLen+1)), nil, dlock.ErrInvalidName},
		{"zero lease", c.Lock("x"), []dlock.Option{dlock.LeaseTime(0)}, dlock.ErrInvalidDuration},
		{"negative lease", c.Mutex("x"), []dlock.Option{dlock.LeaseTime(-time.Second)}, dlock.ErrInvalidDuration},
		{"negative wait", c.Mutex("x"), []dlock.Option{dlock.Wait(-1)}, dlock.ErrInvalidDuration},
		{"zero replicas", c.Mutex("x"), []dlock.Option{dlock.ReplicaAck(0, time.Second)}, dlock.ErrInvalidArgument},
		{"zero replica wait", c.Mutex("x"), []dlock.Option{dlock.ReplicaAck(1, 0)}, dlock.ErrInvalidDuration},
		{"nil OnLost", c.Mutex("x"), []dlock.Option{dlock.OnLost(nil)}, dlock.ErrInvalidArgument},
	}
	for _, tc := range cases {
		if _, err := tc.lk.Acquire(ctx, tc.opts...); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if n, _ := rdb.DBSize(ctx).Result(); n != 0 {
		t.Fatalf("bad input wrote %d keys", n)
	}

	l, err := c.Mutex("x").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Extend(ctx, 0); !errors.Is(err, dlock.ErrInvalidDuration) {
		t.Fatalf("Extend(0): %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second unlock: %v", err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("extend after unlock: %v", err)
	}
	if err := l.Verify(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("verify after unlock: %v", err)
	}
}

// A key of the wrong type is reported as ErrWrongType and left alone.
func TestWrongType(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	ctx := context.Background()
	rdb.Set(ctx, "dlock:{s}", "someone else's string", 0)
	rdb.HSet(ctx, "dlock:{h}", "field", "value")
	rdb.LPush(ctx, "dlock:{l}", "x")
	for _, tc := range []struct {
		lk   dlock.Locker
		key  string
		kind string
	}{
		{c.Lock("s"), "dlock:{s}", "string"},
		{c.Mutex("h"), "dlock:{h}", "hash"},
		{c.Lock("h"), "dlock:{h}", "hash"},
		{c.Mutex("l"), "dlock:{l}", "list"},
		{c.Lock("l"), "dlock:{l}", "list"},
	} {
		_, err := tc.lk.Acquire(ctx, dlock.Wait(time.Second))
		if !errors.Is(err, dlock.ErrWrongType) {
			t.Errorf("%T on a %s: %v, want ErrWrongType", tc.lk, tc.kind, err)
		}
		if typ, _ := rdb.Type(ctx, tc.key).Result(); typ != tc.kind {
			t.Errorf("key changed to %s", typ)
		}
	}
	if v, _ := rdb.Get(ctx, "dlock:{s}").Result(); v != "someone else's string" {
		t.Fatalf("string changed to %q", v)
	}
	if _, err := c.Inspect(ctx, "l"); !errors.Is(err, dlock.ErrWrongType) {
		t.Fatalf("inspect a list: %v", err)
	}
}

// Redis unreachable: a clear error, not ErrNotAcquired, no panic.
func TestRedisDown(t *testing.T) {
	srv := redisprocStartStopped(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb)
	_, err := c.Lock("x").Acquire(context.Background(), dlock.Wait(time.Second))
	if err == nil || errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("acquire with Redis down: %v", err)
	}
	if !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("error does not name the lock: %v", err)
	}
}

// redisprocStartStopped returns the address of a server that was started
// and stopped: nothing listens there.
func redisprocStartStopped(t *testing.T) string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := redisproc.Start(ctx, redisproc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	addr := s.Addr()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestClosedClient(t *testing.T) {
	rdb := server(t)
	c, err := dlock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := c.Lock("closing").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if !closedWithin(l.Done(), time.Second) {
		t.Fatal("a lease held at Close was not reported lost")
	}
	if n, _ := rdb.Exists(ctx, "dlock:{closing}").Result(); n != 0 {
		t.Fatal("Close left our own lock in Redis")
	}
	if _, err := c.Lock("x").Acquire(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("acquire after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A nil context is bad input for every call that takes one: an error
// wrapping ErrInvalidArgument, no panic, and nothing changed (a held lease
// stays held).
func TestNilContext(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb)
	c2, c3 := newClient(t, rdb, dlock.Config{Prefix: "n2:"}), newClient(t, rdb, dlock.Config{Prefix: "n3:"})
	var nilCtx context.Context
	ctx := context.Background()
	lockers := []dlock.Locker{c.Mutex("nil"), c.Lock("nil"), c.FairLock("nil"), c.RWLock("nil").ReadLock(),
		c.RWLock("nil").WriteLock(), c.MultiLock("nil-a", "nil-b"), c.Semaphore("nil-s", 2), dlock.NewRedLock("nil-r", c, c2, c3)}
	for _, lk := range lockers {
		if _, err := lk.Acquire(nilCtx); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%T.Acquire(nil): %v, want ErrInvalidArgument", lk, err)
		}
	}
	sem := c.Semaphore("nil-s", 2)
	if _, err := sem.AcquireN(nilCtx, 2); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("AcquireN(nil): %v", err)
	}
	if err := sem.Release(nilCtx, strings.Repeat("a", 32)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Release(nil): %v", err)
	}
	if err := sem.SetPermits(nilCtx, 3); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("SetPermits(nil): %v", err)
	}
	if _, err := c.Inspect(nilCtx, "nil"); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Inspect(nil): %v", err)
	}
	if _, err := c.List(nilCtx, "*"); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("List(nil): %v", err)
	}
	if _, err := c.ForceUnlock(nilCtx, "nil"); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("ForceUnlock(nil): %v", err)
	}
	l, err := c.Mutex("nil").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Verify(nilCtx); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Verify(nil): %v", err)
	}
	if err := l.Extend(nilCtx, time.Second); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Extend(nil): %v", err)
	}
	if err := l.Unlock(nilCtx); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Unlock(nil): %v", err)
	}
	if err := l.Verify(ctx); err != nil {
		t.Fatalf("the lease after the bad calls: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := dlock.Do(nilCtx, c.Mutex("nil"), func(context.Context, *dlock.Lease) error { return nil }); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Do(nil): %v", err)
	}
}

// The errors of calls on no one lock name the call once: dlock: new client:
// <reason>, dlock: list "<pattern>": <reason>.
func TestCallErrors(t *testing.T) {
	rdb := server(t)
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		cfg  []dlock.Config
		want error
	}{
		{"nil client", nil, nil, dlock.ErrInvalidArgument},
		{"nil pointer", (*redis.Client)(nil), nil, dlock.ErrInvalidArgument},
		{"short TTL", rdb, []dlock.Config{{TTL: time.Microsecond}}, dlock.ErrInvalidDuration},
		{"negative TTL", rdb, []dlock.Config{{TTL: -time.Second}}, dlock.ErrInvalidDuration},
		{"negative renew batch", rdb, []dlock.Config{{RenewBatch: -1}}, dlock.ErrInvalidArgument},
		{"long label", rdb, []dlock.Config{{Label: strings.Repeat("l", 257)}}, dlock.ErrInvalidArgument},
		{"brace prefix", rdb, []dlock.Config{{Prefix: "a{b"}}, dlock.ErrInvalidArgument},
		{"two Configs", rdb, []dlock.Config{{}, {}}, dlock.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := dlock.New(tc.rdb, tc.cfg...)
			if c != nil {
				c.Close()
				t.Fatal("New returned a Client")
			}
			dlocktest.CheckError(t, err, tc.want, "dlock: new client: ")
		})
	}
	pattern := strings.Repeat("p", seam.MaxNameLen+1)
	_, err := newClient(t, rdb).List(context.Background(), pattern)
	dlocktest.CheckError(t, err, dlock.ErrInvalidArgument, `dlock: list "`+pattern[:64]+`…": `)
}
