package redistest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/leakcheck"
	"github.com/dlockgo/dlock/internal/redisproc"
)

func TestMain(m *testing.M) {
	leakcheck.VerifyTestMain(m)
}

func TestHelpers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	s := Start(t, "--maxmemory-policy", "allkeys-lru")
	if got := Client(t, s).ConfigGet(ctx, "maxmemory-policy").Val()["maxmemory-policy"]; got != "allkeys-lru" {
		t.Errorf("maxmemory-policy = %q", got)
	}
	ms := StartMasters(t, 2)
	if len(ms) != 2 || ms[0].Addr() == ms[1].Addr() {
		t.Fatalf("StartMasters(2) = %v", ms)
	}
	st := StartSentinel(t, redisproc.SentinelOptions{Sentinels: 1})
	if err := FailoverClient(t, st).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Errorf("SET via failover client: %v", err)
	}
	cl := StartCluster(t, 1)
	if err := ClusterClient(t, cl).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Errorf("SET via cluster client: %v", err)
	}
}

// fakeTB records Fatalf and stops the calling goroutine like testing.T does.
type fakeTB struct {
	testing.TB
	fatal    string
	cleanups []func()
}

func (f *fakeTB) Helper()           {}
func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestMissingRedisServerFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	f := &fakeTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Start(f)
	}()
	<-done
	for _, fn := range f.cleanups {
		fn()
	}
	if !strings.Contains(f.fatal, "apt-get install redis-server") {
		t.Fatalf("Fatalf message %q lacks the install hint", f.fatal)
	}
}
