package redisproc

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/leakcheck"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

// testCtx returns a context ending after d or at the end of the test.
func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// closeLater closes c at the end of the test, failing it on error.
func closeLater(t *testing.T, c interface{ Close() error }) {
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
}

// start starts a standalone server closed at the end of the test.
func start(t *testing.T, o Options) *Server {
	t.Helper()
	s, err := Start(testCtx(t, 30*time.Second), o)
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, s)
	return s
}

// client returns a client without retries that honours context deadlines,
// closed at the end of the test.
func client(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		ContextTimeoutEnabled: true,
	})
	closeLater(t, c)
	return c
}

// eventually calls f until it returns nil or d passes, then fails the test.
func eventually(t *testing.T, d time.Duration, what string, f func(context.Context) error) {
	t.Helper()
	if err := poll(testCtx(t, d), what, f); err != nil {
		t.Fatal(err)
	}
}
