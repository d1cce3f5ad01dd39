// Package servers starts the servers a benchmark run talks to: redis-server
// processes on free loopback ports and an embedded etcd in a child process.
// Every process is signalled only by its own PID and is gone after Close.
package servers

import (
	"context"
	"errors"
	"fmt"
	"github.com/dlockgo/dlock/internal/freeport"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoRedisServer is returned (wrapped) when redis-server is not on PATH.
var ErrNoRedisServer = errors.New("servers: redis-server not found on PATH; install it with: apt-get install redis-server")

// Redis is one redis-server process without persistence on 127.0.0.1.
type Redis struct {
	Addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartRedis starts a redis-server on a free loopback port and returns once
// it answers as itself (INFO shows our child's process id). A port taken by
// someone else between the probe and the bind is retried on a new port.
func StartRedis(ctx context.Context) (*Redis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoRedisServer, err)
	}
	for attempt := 1; ; attempt++ {
		port, err := freeport.Take(false)
		if err != nil {
			return nil, err
		}
		r, err := startRedis(ctx, bin, port)
		if err == nil || attempt == 3 || ctx.Err() != nil {
			return r, err
		}
	}
}

func startRedis(ctx context.Context, bin string, port int) (*Redis, error) {
	dir, err := os.MkdirTemp("", "dlockbench-redis-")
	if err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	log := filepath.Join(dir, "redis.log")
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", log)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a Ctrl-C on the bench does not reach it first
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("servers: starting redis-server: %w", err)
	}
	r := &Redis{Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(r.done) }()

	want := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr, MaxRetries: -1, DialTimeout: time.Second})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		info, err := rdb.Info(ctx, "server").Result()
		if err == nil && strings.Contains(info, want) {
			return r, nil
		}
		select {
		case <-r.done:
			err = errors.New("redis-server exited")
		case <-ctx.Done():
			err = fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(10 * time.Millisecond):
			continue
		}
		data, _ := os.ReadFile(log)
		r.Close()
		return nil, fmt.Errorf("servers: redis-server on %s: %w\n%s", r.Addr, err, tail(string(data), 10))
	}
}

// PID returns the server's process id.
func (r *Redis) PID() int { return r.cmd.Process.Pid }

// Close kills the server, waits until it is reaped and removes its directory.
func (r *Redis) Close() error {
	select {
	case <-r.done:
	default:
		if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("servers: kill redis-server %d: %w", r.PID(), err)
		}
		<-r.done
	}
	return os.RemoveAll(r.dir)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
