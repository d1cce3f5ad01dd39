package dlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// libraries returns the names of the function libraries the server holds.
func libraries(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	libs, err := rdb.FunctionList(context.Background(), redis.FunctionListQuery{}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range libs {
		names = append(names, l.Name)
	}
	return names
}

// lifecycle acquires, renews (watchdog), verifies, extends and releases a
// Lock and a Mutex on c, calling between before each step.
func lifecycle(t *testing.T, c *dlock.Client, name string, between func(step string)) {
	t.Helper()
	ctx := context.Background()
	between("acquire")
	l, err := c.Lock(name).Acquire(ctx)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	between("renewal")
	waitRenewals(t, c, 3)
	between("verify")
	if err := l.Verify(ctx); err != nil {
		t.Fatalf("verify after the renewals: %v", err)
	}
	between("extend")
	if err := l.Extend(ctx, time.Second); err != nil {
		t.Fatalf("extend: %v", err)
	}
	between("unlock")
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	between("mutex")
	m, err := c.Mutex(name+"-m").Acquire(ctx, dlock.Wait(0))
	if err != nil {
		t.Fatalf("mutex acquire: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatalf("mutex unlock: %v", err)
	}
}

// On Redis 7 the scripts run as functions of one library (FCALL), loaded
// by the first call that finds it missing; FUNCTION FLUSH between any two
// steps costs a reload and nothing else.
func TestFunctionFlush(t *testing.T) {
	rdb := server(t)
	c := newClient(t, rdb, dlock.Config{TTL: 300 * time.Millisecond})
	lifecycle(t, c, "flush", func(step string) {
		if err := rdb.FunctionFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	})
	if n := commandCalls(t, rdb, "fcall"); n == 0 {
		t.Error("no FCALL: the scripts did not run as functions")
	}
	if n := commandCalls(t, rdb, "evalsha"); n != 0 {
		t.Errorf("%d EVALSHA calls on a server that runs functions", n)
	}
	// One library, whatever the number of Clients that load it.
	c2 := newClient(t, rdb, dlock.Config{TTL: 300 * time.Millisecond})
	lifecycle(t, c2, "flush2", func(string) {})
	if libs := libraries(t, rdb); len(libs) != 1 || !strings.HasPrefix(libs[0], "dlock_") {
		t.Errorf("libraries %v, want one dlock library", libs)
	}
}

// A server whose ACL denies functions (as a Redis before 7.0 has none) is
// sent EVALSHA, and the script cache's loss is still recovered by EVAL.
func TestFunctionsRefused(t *testing.T) {
	srv := redistest.Start(t)
	admin := redistest.Client(t, srv)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "scripts", "on", ">pw", "~*", "&*", "+@all", "-fcall", "-function").Err(); err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "scripts", Password: "pw"})
	t.Cleanup(func() { rdb.Close() })
	c := newClient(t, rdb, dlock.Config{TTL: 300 * time.Millisecond})
	lifecycle(t, c, "refused", func(string) {
		if err := admin.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	})
	if n := commandCalls(t, admin, "evalsha"); n == 0 {
		t.Error("no EVALSHA: the Client did not fall back from functions")
	}
	if libs := libraries(t, admin); len(libs) != 0 {
		t.Errorf("libraries %v loaded by a user the ACL denies FUNCTION", libs)
	}
}
