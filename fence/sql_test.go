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
)

const schema = `CREATE TABLE stock (sku TEXT PRIMARY KEY, qty BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0, hist TEXT NOT NULL DEFAULT '')`

// deduct takes $1 units if there are that many.
var deduct = fence.Update{Table: "stock", Key: "sku", Set: "qty = qty - $1", Where: "qty >= $1"}

func setup(t *testing.T, s store, qty int64) {
	t.Helper()
	ctx := context.Background()
	if err := s.run(ctx, schema); err != nil {
		t.Fatal(err)
	}
	if err := s.run(ctx, "INSERT INTO stock (sku, qty) VALUES ($1, $2)", "1001", qty); err != nil {
		t.Fatal(err)
	}
}

func row(t *testing.T, s store) (qty, fenceVal int64) {
	t.Helper()
	if err := s.query(context.Background(), "SELECT qty, fence FROM stock WHERE sku = $1", "1001").Scan(&qty, &fenceVal); err != nil {
		t.Fatal(err)
	}
	return qty, fenceVal
}

func TestSQLStaleTokenRejectedAfterNewerWrote(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			setup(t, s, 10)
			if err := s.exec(ctx, deduct, 34, "1001", 1); err != nil {
				t.Fatalf("token 34: %v", err)
			}
			err := s.exec(ctx, deduct, 33, "1001", 1)
			var stale *fence.StaleError
			if !errors.Is(err, fence.ErrStale) || !errors.As(err, &stale) || stale.Token != 33 || stale.Seen != 34 {
				t.Fatalf("token 33 after 34: got %v, want StaleError{33, 34}", err)
			}
			dlocktest.CheckError(t, err, fence.ErrStale, `dlock: fence update "stock": `)
			if qty, f := row(t, s); qty != 9 || f != 34 {
				t.Fatalf("after the stale write: qty %d fence %d, want 9 and 34", qty, f)
			}
		})
	}
}

func TestSQLEqualTokenWritesAgain(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			setup(t, s, 10)
			for i := range 3 {
				if err := s.exec(ctx, deduct, 50, "1001", 2); err != nil {
					t.Fatalf("write %d with the same token: %v", i, err)
				}
			}
			if qty, f := row(t, s); qty != 4 || f != 50 {
				t.Fatalf("qty %d fence %d, want 4 and 50", qty, f)
			}
		})
	}
}

func TestSQLConditionFailedIsNotStale(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			setup(t, s, 1)
			if err := s.exec(ctx, deduct, 7, "1001", 2); !errors.Is(err, fence.ErrCondition) || errors.Is(err, fence.ErrStale) {
				t.Fatalf("current token, condition false: got %v, want ErrCondition", err)
			}
			if err := s.exec(ctx, deduct, 8, "1001", 1); err != nil {
				t.Fatal(err)
			}
			// Stale and failing the condition: stale is what the caller must hear.
			if err := s.exec(ctx, deduct, 7, "1001", 5); !errors.Is(err, fence.ErrStale) {
				t.Fatalf("stale token with a false condition: got %v, want ErrStale", err)
			}
			if err := s.exec(ctx, deduct, 9, "nope", 1); !errors.Is(err, fence.ErrNoRow) {
				t.Fatalf("missing row: got %v, want ErrNoRow", err)
			}
			if qty, f := row(t, s); qty != 0 || f != 8 {
				t.Fatalf("qty %d fence %d, want 0 and 8", qty, f)
			}
		})
	}
}

func TestSQLBadInputChangesNothing(t *testing.T) {
	s := stores(t)[2] // SQLite is enough: nothing reaches the database
	ctx := context.Background()
	setup(t, s, 5)
	for _, tc := range []struct {
		u     fence.Update
		token int64
		want  error
	}{
		{deduct, 0, fence.ErrInvalidToken},
		{deduct, -3, fence.ErrInvalidToken},
		{deduct, fence.MaxToken, fence.ErrInvalidToken},
		{fence.Update{Table: "stock; DROP TABLE stock", Key: "sku"}, 1, fence.ErrInvalidUpdate},
		{fence.Update{Table: "stock", Key: "sku = sku OR 1=1 --"}, 1, fence.ErrInvalidUpdate},
		{fence.Update{Table: "stock", Key: "sku", Fence: "f\x00"}, 1, fence.ErrInvalidUpdate},
	} {
		if err := s.exec(ctx, tc.u, tc.token, "1001", 1); !errors.Is(err, tc.want) {
			t.Errorf("%+v token %d: got %v, want %v", tc.u, tc.token, err, tc.want)
		}
	}
	if qty, f := row(t, s); qty != 5 || f != 0 {
		t.Fatalf("bad input changed the row: qty %d fence %d", qty, f)
	}
}

func TestSQLStatement(t *testing.T) {
	update, probe, err := deduct.SQL(1)
	if err != nil {
		t.Fatal(err)
	}
	want := "UPDATE stock SET qty = qty - $1, fence = $2 WHERE sku = $3 AND fence <= $2 AND (qty >= $1)"
	if update != want || probe != "SELECT fence FROM stock WHERE sku = $1" {
		t.Fatalf("got\n%s\n%s\nwant\n%s", update, probe, want)
	}
}

// TestSQLFenceNeverDecreases: 64 goroutines write with random tokens. The
// database appends every accepted token to hist in the same UPDATE, so hist
// is the commit order: it must never go down; a watcher reading the fence
// meanwhile must never see it go down; every rejected token must be below a
// token that was accepted.
func TestSQLFenceNeverDecreases(t *testing.T) {
	for _, s := range stores(t) {
		t.Run(s.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			setup(t, s, 0)
			stamp := fence.Update{Table: "stock", Key: "sku", Set: "hist = hist || $1"}

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
					var f int64
					if err := s.query(ctx, "SELECT fence FROM stock WHERE sku = $1", "1001").Scan(&f); err != nil {
						watchErr <- err
						return
					}
					if f < last {
						watchErr <- errors.New("watcher saw the fence go from " + strconv.FormatInt(last, 10) + " to " + strconv.FormatInt(f, 10))
						return
					}
					last = f
				}
			}()

			var (
				mu       sync.Mutex
				accepted int
				rejected []*fence.StaleError
				wg       sync.WaitGroup
			)
			errs := make(chan error, 64)
			for g := range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 42))
					for i := range 8 {
						// Rising with jitter: many accepted, many stale.
						tok := 1 + int64(i)*50 + r.Int64N(200)
						err := s.exec(ctx, stamp, tok, "1001", ","+strconv.FormatInt(tok, 10))
						var stale *fence.StaleError
						switch {
						case err == nil:
							mu.Lock()
							accepted++
							mu.Unlock()
						case errors.As(err, &stale):
							if stale.Seen <= tok {
								errs <- errors.New("stale error with seen <= token: " + err.Error())
							}
							mu.Lock()
							rejected = append(rejected, stale)
							mu.Unlock()
						default:
							errs <- err
							return
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if err := <-watchErr; err != nil {
				t.Fatal(err)
			}

			var hist string
			var final int64
			if err := s.query(ctx, "SELECT hist, fence FROM stock WHERE sku = $1", "1001").Scan(&hist, &final); err != nil {
				t.Fatal(err)
			}
			toks := strings.Split(strings.TrimPrefix(hist, ","), ",")
			if len(toks) != accepted {
				t.Fatalf("%d tokens in the history, %d writes accepted", len(toks), accepted)
			}
			var prev int64
			for i, ts := range toks {
				tok, _ := strconv.ParseInt(ts, 10, 64)
				if tok < prev {
					t.Fatalf("accepted token %d after %d (position %d of %s)", tok, prev, i, hist)
				}
				prev = tok
			}
			if prev != final {
				t.Fatalf("fence %d, last accepted token %d", final, prev)
			}
			if len(rejected) == 0 || accepted == 0 {
				t.Fatalf("%d accepted, %d rejected: the test did not exercise both", accepted, len(rejected))
			}
			t.Logf("%d writes accepted, %d rejected as stale, final fence %d", accepted, len(rejected), final)
		})
	}
}
