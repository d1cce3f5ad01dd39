package redisproc

import (
	"context"
	"errors"
	"github.com/dlockgo/dlock/internal/freeport"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestKillRestart(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	s := start(t, Options{})
	c := client(t, s.Addr())
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	addr, pid := s.Addr(), s.PID()
	if !s.Running() || pid == 0 || !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("after Start: Running=%v PID=%d Addr=%s", s.Running(), pid, addr)
	}
	if _, err := os.Stat(s.Dir() + "/redis.log"); err != nil {
		t.Errorf("log file: %v", err)
	}

	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if s.Running() || s.PID() != 0 {
		t.Fatalf("after Kill: Running=%v PID=%d", s.Running(), s.PID())
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING after Kill succeeded")
	}

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.Addr() != addr || s.PID() == 0 || s.PID() == pid {
		t.Fatalf("after Restart: Addr=%s (was %s) PID=%d (was %d)", s.Addr(), addr, s.PID(), pid)
	}
	if err := c.Get(ctx, "k").Err(); err != redis.Nil {
		t.Fatalf("GET k after Restart: %v, want redis.Nil (no persistence)", err)
	}

	// Restart of a running server replaces the process.
	pid = s.PID()
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid {
		t.Fatal("Restart of a running server kept its process")
	}

	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if s.Running() {
		t.Fatal("running after Stop")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := os.Stat(s.Dir()); !os.IsNotExist(err) {
		t.Errorf("dir after Close: %v", err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart after Close succeeded")
	}
}

func TestPauseResume(t *testing.T) {
	s := start(t, Options{})
	c := client(t, s.Addr())
	ping := func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err()
	}
	ctx := testCtx(t, 30*time.Second)
	if err := ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := ping(ctx); err == nil {
		t.Fatal("PING to paused server succeeded")
	}
	if !s.Running() {
		t.Fatal("paused server not Running")
	}
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "PING after Resume", ping)

	// Close must not hang on a paused server.
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Running() {
		t.Fatal("running after Close")
	}
}

func TestStartMasters(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	servers, err := StartMasters(ctx, 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, s := range servers {
		closeLater(t, s)
		if seen[s.Addr()] {
			t.Fatalf("address %s used twice", s.Addr())
		}
		seen[s.Addr()] = true
		if err := client(t, s.Addr()).Ping(ctx).Err(); err != nil {
			t.Fatalf("PING %s: %v", s.Addr(), err)
		}
	}
	if len(seen) != 3 {
		t.Fatalf("got %d servers, want 3", len(seen))
	}
}

func TestFixedPortAndArgs(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	port, err := freeport.Take(false)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, Options{Port: port, Args: []string{"--maxmemory-policy", "allkeys-lru"}})
	if s.Port() != port {
		t.Fatalf("Port() = %d, want %d", s.Port(), port)
	}
	got, err := client(t, s.Addr()).ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil || got["maxmemory-policy"] != "allkeys-lru" {
		t.Fatalf("maxmemory-policy = %v, %v", got, err)
	}

	// A second server on the same fixed port fails, showing the log.
	_, err = Start(ctx, Options{Port: port})
	if err == nil || !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("second Start on port %d: %v, want bind error with log tail", port, err)
	}
}

func TestNoRedisServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Start(context.Background(), Options{})
	if !errors.Is(err, ErrNoRedisServer) || !strings.Contains(err.Error(), "apt-get install redis-server") {
		t.Fatalf("Start without redis-server: %v", err)
	}
}

func TestRetryOnTakenPort(t *testing.T) {
	busy := start(t, Options{})
	attempts := 0
	// The first attempt is made to collide with busy, as if another process
	// had taken the free port first; launch must retry on a new port.
	s, err := launch(testCtx(t, 30*time.Second), "", 0, false, func(dir string, port int) ([]string, error) {
		attempts++
		if attempts == 1 {
			port = busy.Port()
		}
		return standaloneArgs(nil)(dir, port)
	})
	if err != nil {
		t.Fatal(err)
	}
	closeLater(t, s)
	if attempts != 2 || s.Port() == busy.Port() {
		t.Fatalf("attempts = %d, port %d (busy %d); want a second attempt on a new port", attempts, s.Port(), busy.Port())
	}
}
