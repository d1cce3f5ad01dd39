package fence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/redistest"
)

func TestRedisStaleRejectedEqualAccepted(t *testing.T) {
	rdb := redistest.Client(t, redistest.Start(t))
	ctx := context.Background()
	if err := fence.Set(ctx, rdb, "doc", "v34", 34, 0); err != nil {
		t.Fatal(err)
	}
	err := fence.Set(ctx, rdb, "doc", "v33", 33, 0)
	var stale *fence.StaleError
	if !errors.As(err, &stale) || !errors.Is(err, fence.ErrStale) || stale.Seen != 34 {
		t.Fatalf("token 33 after 34: got %v, want StaleError seen 34", err)
	}
	dlocktest.CheckError(t, err, fence.ErrStale, `dlock: fence set "doc": `)
	if v, tok, err := fence.Get(ctx, rdb, "doc"); err != nil || v != "v34" || tok != 34 {
		t.Fatalf("after stale write: %q %d %v, want v34 34", v, tok, err)
	}
	if err := fence.Set(ctx, rdb, "doc", "v34b", 34, 0); err != nil {
		t.Fatalf("same token again: %v", err)
	}
	if err := fence.Set(ctx, rdb, "doc", "v35", 35, time.Minute); err != nil {
		t.Fatal(err)
	}
	if v, tok, _ := fence.Get(ctx, rdb, "doc"); v != "v35" || tok != 35 {
		t.Fatalf("got %q %d, want v35 35", v, tok)
	}
	if ttl := rdb.PTTL(ctx, "doc").Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("TTL %v, want (0, 1m]", ttl)
	}
	if _, _, err := fence.Get(ctx, rdb, "missing"); !errors.Is(err, fence.ErrNoRow) {
		t.Fatalf("missing key: %v, want ErrNoRow", err)
	}
}

func TestRedisBadInputChangesNothing(t *testing.T) {
	rdb := redistest.Client(t, redistest.Start(t))
	ctx := context.Background()
	rdb.Set(ctx, "str", "plain", 0)
	rdb.HSet(ctx, "foreign", "x", "1")
	for _, tc := range []struct {
		key   string
		token int64
		ttl   time.Duration
		want  error
	}{
		{"", 1, 0, fence.ErrInvalidUpdate},
		{"k", 0, 0, fence.ErrInvalidToken},
		{"k", fence.MaxToken, 0, fence.ErrInvalidToken},
		{"k", 1, -time.Second, fence.ErrInvalidUpdate},
	} {
		if err := fence.Set(ctx, rdb, tc.key, "v", tc.token, tc.ttl); !errors.Is(err, tc.want) {
			t.Errorf("Set(%q, %d, %v): %v, want %v", tc.key, tc.token, tc.ttl, err, tc.want)
		}
	}
	if n := rdb.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("bad input wrote the key")
	}
	if err := fence.Set(ctx, rdb, "str", "v", 1, 0); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Fatalf("string key: %v, want WRONGTYPE", err)
	}
	if err := fence.Set(ctx, rdb, "foreign", "v", 1, 0); err == nil {
		t.Fatal("a hash without a token was overwritten")
	}
	if rdb.Get(ctx, "str").Val() != "plain" || rdb.HGet(ctx, "foreign", "v").Err() == nil {
		t.Fatal("foreign keys were changed")
	}
}

// TestRedisFenceNeverDecreases: 64 goroutines write their token as the value
// with random rising tokens; a watcher must never see the token go down or a
// value that is not its token's.
func TestRedisFenceNeverDecreases(t *testing.T) {
	rdb := redistest.Client(t, redistest.Start(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	stop := make(chan struct{})
	watchErr := make(chan error, 1)
	go func() {
		var last int64
		for {
			select {
			case <-stop:
				watchErr <- nil
				return
			default:
			}
			v, tok, err := fence.Get(ctx, rdb, "doc")
			if errors.Is(err, fence.ErrNoRow) {
				continue
			}
			if err != nil {
				watchErr <- err
				return
			}
			if tok < last || v != strconv.FormatInt(tok, 10) {
				watchErr <- errors.New("watcher saw token " + strconv.FormatInt(tok, 10) + " value " + v + " after " + strconv.FormatInt(last, 10))
				return
			}
			last = tok
		}
	}()
	var mu sync.Mutex
	var accepted, rejected int
	var maxAccepted int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 8 {
				tok := 1 + int64(i)*50 + r.Int64N(200)
				err := fence.Set(ctx, rdb, "doc", strconv.FormatInt(tok, 10), tok, 0)
				mu.Lock()
				switch {
				case err == nil:
					accepted++
					maxAccepted = max(maxAccepted, tok)
				case errors.Is(err, fence.ErrStale):
					rejected++
				default:
					t.Error(err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-watchErr; err != nil {
		t.Fatal(err)
	}
	_, final, err := fence.Get(ctx, rdb, "doc")
	if err != nil || final != maxAccepted {
		t.Fatalf("final token %d (%v), highest accepted %d", final, err, maxAccepted)
	}
	if accepted == 0 || rejected == 0 {
		t.Fatalf("%d accepted, %d rejected: both must happen", accepted, rejected)
	}
}
