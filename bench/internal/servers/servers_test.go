package servers

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	if ServeEtcdChild() {
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

func TestRedisStartsAndIsGoneAfterClose(t *testing.T) {
	r, err := StartRedis(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr})
	defer rdb.Close()
	if err := rdb.Set(t.Context(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if cpu, err := ProcessCPU(r.PID()); err != nil || cpu < 0 {
		t.Fatalf("ProcessCPU = %v, %v", cpu, err)
	}
	pid, dir := r.PID(), r.dir
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if !gone(pid) {
		t.Fatalf("redis-server %d still exists after Close", pid)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("%s not removed: %v", dir, err)
	}
}

func TestEtcdChildServesAndIsGoneAfterClose(t *testing.T) {
	e, err := StartEtcd(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.URL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	_, err = cli.Put(t.Context(), "k", "v")
	cli.Close()
	if err != nil {
		e.Close()
		t.Fatal(err)
	}
	pid := e.PID()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !gone(pid) {
		t.Fatalf("etcd child %d still exists after Close", pid)
	}
}

func TestSelfCPUAdvances(t *testing.T) {
	a := SelfCPU()
	for x := 0; SelfCPU()-a < time.Millisecond; x++ { // burn a little CPU
		_ = x * x
	}
	if SelfCPU() <= a {
		t.Fatal("SelfCPU did not advance")
	}
}

// Without redis-server on PATH the start fails with the install hint.
func TestMissingRedisServerSaysHowToInstall(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r, err := StartRedis(t.Context())
	if !errors.Is(err, ErrNoRedisServer) || r != nil {
		t.Fatalf("StartRedis = %v, %v; want ErrNoRedisServer", r, err)
	}
}
