package backend_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/internal/witness"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T, kind, addr string) *backend.Backend {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := backend.Open(ctx, kind, addr)
	if err != nil {
		t.Fatalf("open %s %q: %v", kind, addr, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close %s: %v", kind, err)
		}
	})
	return b
}

func client(t *testing.T, b *backend.Backend, label string) backend.Client {
	t.Helper()
	c, err := b.NewClient(context.Background(), backend.ClientOptions{Label: label})
	if err != nil {
		t.Fatalf("client %s: %v", label, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Every backend: clients of one Backend exclude each other on a Mutex and a
// Lock (counted by a witness), and tokens grow.
func TestExclusionOnEveryBackend(t *testing.T) {
	for _, kind := range backend.Kinds {
		t.Run(kind, func(t *testing.T) {
			b := open(t, kind, "")
			if b.Kind != kind || b.Addr == "" || b.Desc == "" {
				t.Fatalf("backend %+v", b)
			}
			var w witness.Witness
			var mu sync.Mutex
			var last int64
			const workers, loops = 4, 10
			errs := make(chan error, workers)
			var wg sync.WaitGroup
			for i := 0; i < workers; i++ {
				c := client(t, b, fmt.Sprintf("w%d", i))
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
					defer cancel()
					for j := 0; j < loops; j++ {
						lk := c.Mutex("excl")
						if j%2 == 1 {
							lk = c.Lock("excl-reentrant")
						}
						l, err := lk.Acquire(ctx)
						if err != nil {
							errs <- err
							return
						}
						w.Enter(lk.Name())
						mu.Lock()
						if lk.Name() == "excl" && l.Token() <= last {
							errs <- fmt.Errorf("token %d after %d", l.Token(), last)
						}
						if lk.Name() == "excl" {
							last = l.Token()
						}
						mu.Unlock()
						time.Sleep(time.Millisecond)
						w.Exit(lk.Name())
						if err := l.Unlock(ctx); err != nil {
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if n := w.Entries(); n != workers*loops {
				t.Fatalf("%d entries, want %d", n, workers*loops)
			}
			if n := w.Overlaps(); n != 0 {
				t.Fatalf("%d overlaps", n)
			}
		})
	}
}

// Open(Kind, Addr) reaches the same service: what a child process does.
func TestAddrReachesTheSameService(t *testing.T) {
	for _, kind := range backend.Kinds {
		t.Run(kind, func(t *testing.T) {
			b := open(t, kind, "")
			again := open(t, kind, b.Addr)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			l, err := client(t, b, "first").Mutex("shared").Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			_, err = client(t, again, "second").Mutex("shared").Acquire(ctx, dlock.Wait(0))
			if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("second backend on %s acquired a held lock: %v", b.Addr, err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	if _, err := backend.Open(ctx, "mysql", ""); !errors.Is(err, backend.ErrUnknown) {
		t.Errorf("unknown kind: %v", err)
	}
	for kind, addr := range map[string]string{
		backend.Redis:     "redis://127.0.0.1:1/0",
		backend.Etcd:      "127.0.0.1:1",
		backend.ZooKeeper: "127.0.0.1:1",
	} {
		if _, err := backend.Open(ctx, kind, addr); !errors.Is(err, backend.ErrUnreachable) {
			t.Errorf("%s at %s: %v, want ErrUnreachable", kind, addr, err)
		}
	}
	for kind, addr := range map[string]string{
		backend.Redis:     "not a url",
		backend.Etcd:      "no-port",
		backend.ZooKeeper: ",",
	} {
		if _, err := backend.Open(ctx, kind, addr); !errors.Is(err, backend.ErrBadAddress) || errors.Is(err, backend.ErrUnreachable) {
			t.Errorf("%s at %q: %v, want ErrBadAddress", kind, addr, err)
		}
	}
	b := open(t, backend.Redis, "")
	if !b.Embedded || open(t, backend.Redis, b.Addr).Embedded {
		t.Error("Embedded is not true exactly when Open started the server")
	}
	if rdb, err := b.RedisClient(); err != nil || rdb.Ping(ctx).Err() != nil {
		t.Errorf("RedisClient: %v", err)
	} else {
		rdb.Close()
	}
	if _, err := b.NewClient(ctx, backend.ClientOptions{Session: -time.Second}); !errors.Is(err, dlock.ErrInvalidDuration) {
		t.Errorf("negative session: %v", err)
	}
}
