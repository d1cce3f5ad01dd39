package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/dlockgo/dlock/internal/witness"
)

// 20 readers hold the lock together; a writer is kept out until the last of
// them has released.
func TestRWReadersShare(t *testing.T) {
	srv := redistest.Start(t)
	cs := newClients(t, srv.Addr(), 4)
	ctx := context.Background()
	rw := func(i int) *dlock.RWLock { return cs[i%4].RWLock("doc") }
	const readers = 20
	var w witness.Witness
	leases := make([]*dlock.Lease, readers)
	var wg sync.WaitGroup
	for i := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := rw(i).ReadLock().Acquire(ctx, dlock.Wait(10*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			w.EnterShared("doc")
			leases[i] = l
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if got := w.MaxInside("doc"); got != readers {
		t.Fatalf("%d readers inside at once, want %d", got, readers)
	}
	info, err := cs[0].Inspect(ctx, "doc")
	if err != nil || info.Shape != "rw" || len(info.Holders) != readers || info.Holders[0].Mode != "read" {
		t.Fatalf("inspect: %+v %v", info, err)
	}
	if _, err := rw(0).WriteLock().Acquire(ctx, dlock.Wait(100*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("writer with 20 readers inside: %v", err)
	}

	var lastRelease atomic.Int64
	got := make(chan time.Time, 1)
	go func() {
		l, err := rw(1).WriteLock().Acquire(ctx, dlock.Wait(20*time.Second))
		if err != nil {
			t.Error(err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		w.Enter("doc")
		w.Exit("doc")
		_ = l.Unlock(ctx)
	}()
	eventually(t, 10*time.Second, "writer waiting", func() bool { return zcard(redistest.Client(t, srv), "dlock:{doc}:rw:writers") == 1 })
	for i, l := range leases {
		time.Sleep(5 * time.Millisecond)
		w.ExitShared("doc")
		lastRelease.Store(time.Now().UnixNano())
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
	}
	at := <-got
	if at.IsZero() {
		t.FailNow()
	}
	if at.UnixNano() < lastRelease.Load() {
		t.Fatal("writer got in before the last reader released")
	}
	if n := w.Overlaps(); n != 0 {
		t.Fatalf("%d overlaps", n)
	}
}

// Random readers and writers on 3 Clients: writers alone, readers never with
// a writer (overlap witness), and each writer's token above the last one's.
func TestRWHammer(t *testing.T) {
	srv := redistest.Start(t)
	cs := newClients(t, srv.Addr(), 3)
	ctx := context.Background()
	var w witness.Witness
	var reads, writes atomic.Int64
	var lastWrite, badTokens atomic.Int64 // written only by writers, who are alone
	stop := time.Now().Add(2 * time.Second)
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rw := cs[g%3].RWLock("hammer")
			for time.Now().Before(stop) {
				write := rand.N(4) == 0
				lk := rw.ReadLock()
				if write {
					lk = rw.WriteLock()
				}
				l, err := lk.Acquire(ctx, dlock.Wait(20*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				if write {
					w.Enter("hammer")
					if l.Token() <= lastWrite.Load() {
						badTokens.Add(1)
					}
					lastWrite.Store(l.Token())
					time.Sleep(time.Millisecond)
					w.Exit("hammer")
					writes.Add(1)
				} else {
					w.EnterShared("hammer")
					time.Sleep(time.Millisecond)
					w.ExitShared("hammer")
					reads.Add(1)
				}
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("%d reads, %d writes, at most %d inside at once", reads.Load(), writes.Load(), w.MaxInside("hammer"))
	if n := w.Overlaps(); n != 0 {
		t.Fatalf("%d overlaps", n)
	}
	if n := badTokens.Load(); n != 0 {
		t.Fatalf("%d write tokens not above the previous write's", n)
	}
	if reads.Load() == 0 || writes.Load() == 0 {
		t.Fatalf("reads %d, writes %d: want both", reads.Load(), writes.Load())
	}
}

// A reader process killed while reading blocks a writer only until its own
// lease runs out, although another reader keeps renewing its own hold.
func TestRWCrashedReader(t *testing.T) {
	const lease = 600 * time.Millisecond
	srv := redistest.Start(t)
	c := newClients(t, srv.Addr(), 1, dlock.Config{TTL: lease})[0]
	ctx := context.Background()
	live, err := c.RWLock("crash").ReadLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	child := startHelper(t, "rw-read-hold", srv.Addr(), "crash", lease)
	child.waitLine(t, "acquired")
	child.kill(t)
	killed := time.Now()
	// The live reader renews for 3 of the dead one's leases.
	time.Sleep(3 * lease)
	info, err := c.Inspect(ctx, "crash")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].ID != live.ID()[:8] {
		t.Fatalf("%v after the kill: %+v %v, want only the live reader", time.Since(killed), info, err)
	}
	if err := live.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := c.RWLock("crash").WriteLock().Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("writer after the live reader left: %v", err)
	}
	_ = l.Unlock(ctx)
}

// Read to write is refused at once with ErrUpgrade; write to read
// (downgrade) works; both sides re-enter with the same token.
func TestRWUpgradeDowngrade(t *testing.T) {
	rdb := server(t)
	c, other := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	rw := c.RWLock("grade")

	r, err := rw.ReadLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	start := time.Now()
	_, err = rw.WriteLock().Acquire(wctx)
	cancel()
	if !errors.Is(err, dlock.ErrUpgrade) || time.Since(start) > 5*time.Second {
		t.Fatalf("upgrade: %v after %v, want ErrUpgrade at once", err, time.Since(start))
	}
	r2, err := rw.ReadLock().Acquire(r.Context(), dlock.Wait(0))
	if err != nil || r2.Token() != r.Token() {
		t.Fatalf("read re-entry: %v, token %d want %d", err, r2.Token(), r.Token())
	}
	_ = r2.Unlock(ctx)
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := rdb.Exists(ctx, "dlock:{grade}:rw:readers", "dlock:{grade}:rw:holds", "dlock:{grade}:rw:writers").Result(); n != 0 {
		t.Fatalf("%d reader keys left after the last reader", n)
	}

	wl, err := rw.WriteLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wl.Token() <= r.Token() {
		t.Fatalf("writer's token %d not above the reader's %d", wl.Token(), r.Token())
	}
	w2, err := rw.WriteLock().Acquire(wl.Context(), dlock.Wait(0))
	if err != nil || w2.Token() != wl.Token() {
		t.Fatalf("write re-entry: %v", err)
	}
	_ = w2.Unlock(ctx)
	down, err := rw.ReadLock().Acquire(wl.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("downgrade (read while writing): %v", err)
	}
	if _, err := other.RWLock("grade").ReadLock().Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another reader while writing: %v", err)
	}
	info, err := c.Inspect(ctx, "grade")
	if err != nil || info.Shape != "rw" || len(info.Holders) != 2 || info.Holders[0].Mode != "write" || info.Holders[1].Mode != "read" ||
		info.Holders[0].ID != info.Holders[1].ID || info.Holders[1].Fence <= info.Holders[0].Fence {
		t.Fatalf("inspect while writing and reading: %+v %v", info, err)
	}
	if err := wl.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := down.Verify(ctx); err != nil {
		t.Fatalf("read hold after the write unlock: %v", err)
	}
	or, err := other.RWLock("grade").ReadLock().Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("another reader after the downgrade: %v", err)
	}
	if _, err := other.RWLock("grade").WriteLock().Acquire(ctx, dlock.Wait(0)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another writer while reading: %v", err)
	}
	_ = or.Unlock(ctx)
	_ = down.Unlock(ctx)
}

// Writer preference: 16 readers loop on the lock, yet a writer gets in
// within 1 s; while it waits, new readers wait behind it, and a reader that
// already reads may re-enter.
func TestRWWriterNotStarved(t *testing.T) {
	srv := redistest.Start(t)
	cs := newClients(t, srv.Addr(), 4)
	ctx := context.Background()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rw := cs[g%4].RWLock("starve")
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := rw.ReadLock().Acquire(ctx, dlock.Wait(20*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				time.Sleep(2 * time.Millisecond)
				_ = l.Unlock(ctx)
			}
		}()
	}
	eventually(t, 10*time.Second, "readers looping", func() bool { return reads.Load() > 100 })
	start := time.Now()
	l, err := cs[0].RWLock("starve").WriteLock().Acquire(ctx, dlock.Wait(10*time.Second))
	took := time.Since(start)
	close(stop)
	if err != nil {
		t.Fatalf("writer: %v", err)
	}
	_ = l.Unlock(ctx)
	wg.Wait()
	t.Logf("writer got in after %v among 16 looping readers", took)
	if took > time.Second {
		t.Fatalf("writer waited %v, want < 1s", took)
	}

	// While a writer waits, a new reader waits too, a re-entering one not.
	r, err := cs[0].RWLock("pref").ReadLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		l, err := cs[1].RWLock("pref").WriteLock().Acquire(ctx, dlock.Wait(10*time.Second))
		if err == nil {
			_ = l.Unlock(ctx)
		}
	}()
	rdb := redistest.Client(t, srv)
	eventually(t, 10*time.Second, "writer waiting", func() bool { return zcard(rdb, "dlock:{pref}:rw:writers") == 1 })
	if _, err := cs[2].RWLock("pref").ReadLock().Acquire(ctx, dlock.Wait(100*time.Millisecond)); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("new reader while a writer waits: %v", err)
	}
	info, _ := cs[0].Inspect(ctx, "pref")
	if len(info.Queue) != 1 || info.Queue[0].Mode != "write" {
		t.Fatalf("inspect: queue %+v, want the waiting writer", info.Queue)
	}
	r2, err := cs[0].RWLock("pref").ReadLock().Acquire(r.Context(), dlock.Wait(0))
	if err != nil {
		t.Fatalf("re-entering reader while a writer waits: %v", err)
	}
	_ = r2.Unlock(ctx)
	_ = r.Unlock(ctx)
	eventually(t, 10*time.Second, "writer served", func() bool { return zcard(rdb, "dlock:{pref}:rw:writers") == 0 })
}

// A writer that gives up waiting lets the readers it held back in at once.
func TestRWWriterLeaves(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := context.Background()
	r, err := a.RWLock("wl").ReadLock().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Unlock(ctx)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := b.RWLock("wl").WriteLock().Acquire(wctx)
		done <- err
	}()
	eventually(t, 10*time.Second, "writer waiting", func() bool { return zcard(rdb, "dlock:{wl}:rw:writers") == 1 })
	got := make(chan error, 1)
	go func() {
		l, err := b.RWLock("wl").ReadLock().Acquire(ctx, dlock.Wait(10*time.Second))
		if err == nil {
			_ = l.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled writer: %v", err)
	}
	if zcard(rdb, "dlock:{wl}:rw:writers") != 0 {
		t.Fatal("cancelled writer left its place")
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("reader held back by the writer: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("reader still held back 2s after the writer left")
	}
}

func ExampleRWLock() {
	rdb := exampleRedis()
	defer rdb.Close()
	c, err := dlock.New(rdb)
	if err != nil {
		panic(err)
	}
	defer c.Close()
	ctx := context.Background()
	rw := c.RWLock("config:pricing")
	r1, _ := rw.ReadLock().Acquire(ctx)
	r2, _ := rw.ReadLock().Acquire(ctx) // another owner: readers share
	_, err = rw.WriteLock().Acquire(ctx, dlock.Wait(0))
	fmt.Println(errors.Is(err, dlock.ErrNotAcquired))
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	w, err := rw.WriteLock().Acquire(ctx, dlock.Wait(time.Second))
	fmt.Println(err)
	_ = w.Unlock(ctx)
	// Output:
	// true
	// <nil>
}
