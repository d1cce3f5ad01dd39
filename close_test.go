package dlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/seam"
	"github.com/redis/go-redis/v9"
)

// Close returns within seam.CloseTimeout (plus a round trip) whatever the
// number of holds: with Redis frozen (SIGSTOP) on a go-redis client
// without ContextTimeoutEnabled (its ReadTimeout is 3 s), and with Redis
// up, where every hold is released (in pipelines) by the time it returns.
// Every lease is reported lost either way.
func TestCloseBounded(t *testing.T) {
	for _, frozen := range []bool{false, true} {
		t.Run(map[bool]string{false: "up", true: "frozen"}[frozen], func(t *testing.T) {
			srv := redistest.Start(t)
			rdb := redistest.Client(t, srv)
			c := newClient(t, rdb)
			ctx := context.Background()
			var leases []*dlock.Lease
			for i := range 200 {
				var opts []dlock.Option
				if i%2 == 1 {
					opts = append(opts, dlock.LeaseTime(time.Minute))
				}
				l, err := c.Mutex("close-"+strconv.Itoa(i)).Acquire(ctx, opts...)
				if err != nil {
					t.Fatal(err)
				}
				leases = append(leases, l)
			}
			outer, err := c.Lock("close-lock").Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			inner, err := c.Lock("close-lock").Acquire(outer.Context())
			if err != nil {
				t.Fatal(err)
			}
			leases = append(leases, outer, inner)
			if frozen {
				if err := srv.Pause(); err != nil {
					t.Fatal(err)
				}
				defer srv.Resume()
			}
			start := time.Now()
			_ = c.Close()
			took := time.Since(start)
			if bound := seam.CloseTimeout + time.Second; took > bound {
				t.Fatalf("Close took %v with %d leases, want at most %v", took, len(leases), bound)
			}
			for i, l := range leases {
				if err := l.Err(); !errors.Is(err, dlock.ErrLockLost) || !strings.Contains(err.Error(), "closed") {
					t.Fatalf("lease %d after Close: %v, want ErrLockLost (closed)", i, err)
				}
			}
			if frozen {
				t.Logf("Close took %v with Redis frozen", took.Round(time.Millisecond))
				return
			}
			if n := rdb.Exists(ctx, "dlock:{close-0}", "dlock:{close-1}", "dlock:{close-199}", "dlock:{close-lock}").Val(); n != 0 {
				t.Fatalf("%d of 4 locks still held after Close", n)
			}
			keys := rdb.Keys(ctx, "dlock:{close-*}").Val()
			for _, k := range keys {
				if !strings.HasSuffix(k, ":fence") {
					t.Fatalf("key %s left after Close", k)
				}
			}
		})
	}
}

// After Close nothing of the Client sends a command: not a waiter (it
// ends with ErrClosed), not the watchdog, not a lease lost at MaxHold, not
// an Unlock of a lease Close ended.
func TestNoCommandAfterClose(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	c := newClient(t, rdb, dlock.Config{TTL: 300 * time.Millisecond})
	holder := newClient(t, rdb, dlock.Config{TTL: 300 * time.Millisecond})
	ctx := context.Background()
	held, err := holder.Mutex("held").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The read hold before the writer waits (a writer that went first
	// would hold it, and the reader wait for ever).
	rl, err := holder.RWLock("held-rw").ReadLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 2)
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for _, l := range []dlock.Locker{c.Mutex("held"), c.RWLock("held-rw").WriteLock()} {
		go func() {
			_, err := l.Acquire(wctx)
			waited <- err
		}()
	}
	kept, err := c.Lock("kept").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex("capped").Acquire(ctx, dlock.MaxHold(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"held", "held-rw"} { // the waiters queue
		deadline := time.Now().Add(10 * time.Second)
		for info, err := holder.Inspect(ctx, name); err != nil || len(info.Queue) != 1; info, err = holder.Inspect(ctx, name) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the waiter did not queue: %+v, %v", name, info, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-waited; !errors.Is(err, dlock.ErrClosed) {
			t.Fatalf("a waiter of the closed Client: %v, want ErrClosed", err)
		}
	}
	if err := kept.Unlock(ctx); !errors.Is(err, dlock.ErrLockLost) {
		t.Fatalf("Unlock after Close: %v, want ErrLockLost", err)
	}
	for _, l := range []*dlock.Lease{held, rl} {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	before := processed(t, rdb)
	time.Sleep(1500 * time.Millisecond)          // past a watchdog tick, the MaxHold cap, a waiter's retry
	if n := processed(t, rdb) - before; n != 1 { // the INFO that read it
		t.Fatalf("%d commands reached Redis after Close", n-1)
	}
}

// processed returns Redis's count of commands processed.
func processed(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	n, err := strconv.ParseInt(infoLine(t, rdb, "stats", "total_commands_processed:"), 10, 64)
	if err != nil {
		t.Fatalf("total_commands_processed in INFO stats: %v", err)
	}
	return n
}

// infoLine returns what follows prefix on its line of section of Redis's
// INFO ("" when no line starts with it).
func infoLine(t *testing.T, rdb *redis.Client, section, prefix string) string {
	t.Helper()
	info, err := rdb.Info(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSuffix(line, "\r"), prefix); ok {
			return rest
		}
	}
	return ""
}

// A Lock re-entered three times is released whole at MaxHold and at Close:
// another client gets it at once, not when its lease runs out.
func TestReenteredReleasedWhole(t *testing.T) {
	rdb := server(t)
	other := newClient(t, rdb)
	ctx := context.Background()
	for _, end := range []string{"maxhold", "close"} {
		t.Run(end, func(t *testing.T) {
			c := newClient(t, rdb, dlock.Config{TTL: 10 * time.Second})
			name := "whole-" + end
			var opts []dlock.Option
			if end == "maxhold" {
				opts = append(opts, dlock.MaxHold(500*time.Millisecond))
			}
			l, err := c.Lock(name).Acquire(ctx, opts...)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := c.Lock(name).Acquire(l.Context(), dlock.Wait(0)); err != nil {
					t.Fatal(err)
				}
			}
			if n := rdb.HGet(ctx, "dlock:{"+name+"}", "n").Val(); n != "3" {
				t.Fatalf("hold count %s, want 3", n)
			}
			if end == "close" {
				_ = c.Close()
			} else {
				select {
				case <-l.Done():
				case <-time.After(10 * time.Second):
					t.Fatal("not lost at MaxHold")
				}
			}
			o, err := other.Lock(name).Acquire(ctx, dlock.Wait(time.Second))
			if err != nil {
				t.Fatalf("another client after the re-entered Lock's %s: %v (hold count %q)", end, err, rdb.HGet(ctx, "dlock:{"+name+"}", "n").Val())
			}
			if err := o.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// gateHook holds the first two script calls that go-redis processes until
// the gate of their kind opens, after telling held which kind each is: a
// caller's (its context carries callerMark: a call on the caller's
// goroutine) or the flusher's (under the Client's own context). Later
// calls pass.
type gateHook struct {
	held                  chan bool // true: a caller's call
	openCaller, openFlush chan struct{}
	calls                 *atomic.Int64
}

type callerMark struct{}

func (h gateHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); (name == "fcall" || name == "evalsha") && h.calls.Add(1) <= 2 {
			caller := ctx.Value(callerMark{}) != nil
			h.held <- caller
			if caller {
				<-h.openCaller
			} else {
				<-h.openFlush
			}
		}
		return next(ctx, cmd)
	}
}
func (h gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A call Close cuts in the flusher (Close cancels the Client's context
// between the flusher taking the call and go-redis sending it) ends its
// Acquire with ErrClosed, never with a cancellation of a context the
// caller did not cancel.
func TestCloseCutsFlushedCall(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	h := gateHook{held: make(chan bool, 2), openCaller: make(chan struct{}), openFlush: make(chan struct{}), calls: new(atomic.Int64)}
	c := newClient(t, rdb)
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	rdb.AddHook(h)
	ctx := context.WithValue(context.Background(), callerMark{}, true)
	heldBy := func(want bool) {
		t.Helper()
		select {
		case caller := <-h.held:
			if caller != want {
				t.Fatalf("a call held on the caller's goroutine: %v, want %v", caller, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("no call reached the hook")
		}
	}
	// A first Acquire's call in flight, on its caller's goroutine, makes
	// the second's go through the flusher.
	try := func(name string) <-chan error { // one Acquire in the background; a grant is let go
		done := make(chan error, 1)
		go func() {
			l, err := c.Mutex(name).Acquire(ctx, dlock.Wait(0))
			if err == nil {
				_ = l.Unlock(context.Background())
			}
			done <- err
		}()
		return done
	}
	first := try("first")
	heldBy(true)
	second := try("second")
	heldBy(false)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	for { // a probe queues behind the held flush until Close has begun
		pctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		l, err := c.Mutex("probe").Acquire(pctx, dlock.Wait(0))
		cancel()
		if errors.Is(err, dlock.ErrClosed) {
			break // Close has cancelled the Client's context
		}
		if err == nil {
			_ = l.Unlock(ctx)
		}
	}
	close(h.openFlush)
	if err := <-second; !errors.Is(err, dlock.ErrClosed) || errors.Is(err, context.Canceled) {
		t.Errorf("the Acquire whose call Close cut: %v, want ErrClosed", err)
	}
	close(h.openCaller)
	<-first // granted before Close took its holds, or ErrClosed: either is right
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}
