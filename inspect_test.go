package dlock_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

// TestInspectEveryShape: Inspect tells each shape apart and shows its
// holders' metadata, counts, fences and TTLs, without changing the lock.
func TestInspectEveryShape(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb, dlock.Config{Label: "inspector"})
	ctx := context.Background()
	for _, tc := range []struct {
		shape   string
		holders int
		mode    string
		take    func(name string) []*dlock.Lease
	}{
		{"mutex", 1, "", func(n string) []*dlock.Lease { return []*dlock.Lease{mustAcquire(t, c.Mutex(n))} }},
		{"lock", 1, "", func(n string) []*dlock.Lease {
			l := mustAcquire(t, c.Lock(n))
			return []*dlock.Lease{l, mustAcquireCtx(t, l.Context(), c.Lock(n))}
		}},
		{"fair", 1, "", func(n string) []*dlock.Lease { return []*dlock.Lease{mustAcquire(t, c.FairLock(n))} }},
		{"rw", 1, "write", func(n string) []*dlock.Lease { return []*dlock.Lease{mustAcquire(t, c.RWLock(n).WriteLock())} }},
		{"rw", 2, "read", func(n string) []*dlock.Lease {
			other := newClient(t, rdb, dlock.Config{Label: "inspector"})
			return []*dlock.Lease{mustAcquire(t, c.RWLock(n).ReadLock()), mustAcquire(t, other.RWLock(n).ReadLock())}
		}},
		{"semaphore", 2, "", func(n string) []*dlock.Lease {
			s := c.Semaphore(n, 3)
			return []*dlock.Lease{mustAcquire(t, s), mustAcquire(t, s)}
		}},
	} {
		t.Run(tc.shape+tc.mode, func(t *testing.T) {
			name := "inspect-" + tc.shape + tc.mode
			ls := tc.take(name)
			info, err := c.Inspect(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if info.Shape != tc.shape && !(tc.shape == "rw" && info.Shape == "rw_write") {
				t.Fatalf("shape %q, want %q", info.Shape, tc.shape)
			}
			if !info.Held || len(info.Holders) != tc.holders {
				t.Fatalf("held %v with %d holders, want %d", info.Held, len(info.Holders), tc.holders)
			}
			for _, h := range info.Holders {
				if h.Label != "inspector" || h.PID != os.Getpid() || h.Fence <= 0 || h.TTL <= 0 || h.Mode != tc.mode {
					t.Fatalf("holder %+v", h)
				}
				if time.Since(h.Since) > time.Minute || h.Since.After(time.Now().Add(time.Second)) {
					t.Fatalf("holder since %v", h.Since)
				}
			}
			if tc.shape == "lock" && info.Holders[0].Count != 2 {
				t.Fatalf("reentrant count %d, want 2", info.Holders[0].Count)
			}
			if info.LastFence < ls[0].Token() {
				t.Fatalf("last fence %d below a held token %d", info.LastFence, ls[0].Token())
			}
			for i := len(ls) - 1; i >= 0; i-- {
				if err := ls[i].Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			info, err = c.Inspect(ctx, name)
			if err != nil || info.Held {
				t.Fatalf("after unlock: %+v, %v", info, err)
			}
		})
	}
	if _, err := c.Inspect(ctx, ""); !errors.Is(err, dlock.ErrInvalidName) {
		t.Fatalf("Inspect(\"\"): %v", err)
	}
	if err := rdb.Set(ctx, dlock.DefaultPrefix+"{inspect-list}", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.RPush(ctx, dlock.DefaultPrefix+"{inspect-list2}", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Inspect(ctx, "inspect-list"); !errors.Is(err, dlock.ErrWrongType) {
		t.Fatalf("Inspect of a foreign string key: %v, want ErrWrongType", err)
	}
	if _, err := c.Inspect(ctx, "inspect-list2"); !errors.Is(err, dlock.ErrWrongType) {
		t.Fatalf("Inspect of a list key: %v, want ErrWrongType", err)
	}
}

func mustAcquire(t *testing.T, l dlock.Locker) *dlock.Lease {
	return mustAcquireCtx(t, context.Background(), l)
}

func mustAcquireCtx(t *testing.T, ctx context.Context, l dlock.Locker) *dlock.Lease {
	t.Helper()
	lease, err := l.Acquire(ctx, dlock.Wait(5*time.Second))
	if err != nil {
		t.Fatalf("acquire %s: %v", l.Name(), err)
	}
	return lease
}
