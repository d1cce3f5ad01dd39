package dlock_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/redis/go-redis/v9"
)

// The SIGKILL tests re-execute this test binary as a child process that
// takes a lock and then blocks until it is killed: TestMain hands the process
// to helperMain when helperEnv is set, before it starts any server.
const (
	helperEnv     = "DLOCK_TEST_HELPER" // mode: fair-wait, sem-hold, rw-read-hold
	helperAddrEnv = "DLOCK_TEST_HELPER_ADDR"
	helperNameEnv = "DLOCK_TEST_HELPER_NAME"
	helperArgEnv  = "DLOCK_TEST_HELPER_ARG" // a duration: queue or watchdog timeout
	helperMaxLife = time.Minute             // a helper orphaned by a crashed test exits by itself
)

// helperMain runs the child process's part: it prints "acquired" (hold modes)
// and then blocks until it is killed.
func helperMain(mode string) int {
	d, err := time.ParseDuration(os.Getenv(helperArgEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(helperAddrEnv)})
	ctx, cancel := context.WithTimeout(context.Background(), helperMaxLife)
	defer cancel()
	name := os.Getenv(helperNameEnv)
	var lk dlock.Locker
	var opts []dlock.Option
	var copts []dlock.Config
	switch mode {
	case "fair-wait":
		c, err := dlock.New(rdb)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 2
		}
		lk, opts = c.FairLock(name), []dlock.Option{dlock.QueueTimeout(d)}
	case "sem-hold", "rw-read-hold":
		copts = append(copts, dlock.Config{TTL: d})
		c, err := dlock.New(rdb, copts...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			return 2
		}
		lk = c.Semaphore(name, 1)
		if mode == "rw-read-hold" {
			lk = c.RWLock(name).ReadLock()
		}
	default:
		fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
		return 2
	}
	if _, err := lk.Acquire(ctx, opts...); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	fmt.Println("acquired")
	<-ctx.Done()
	return 0
}

// helper is a running child process.
type helper struct {
	cmd   *exec.Cmd
	lines chan string
}

// startHelper starts a child process in mode on the lock name at addr and
// kills it at cleanup if the test did not.
func startHelper(t *testing.T, mode, addr, name string, arg time.Duration) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperAddrEnv+"="+addr, helperNameEnv+"="+name, helperArgEnv+"="+arg.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		defer close(h.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() { h.kill(t) })
	return h
}

// waitLine waits (bounded) for the child to print want.
func (h *helper) waitLine(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case l, ok := <-h.lines:
			if !ok {
				t.Fatalf("helper exited before printing %q", want)
			}
			if l == want {
				return
			}
		case <-timeout:
			t.Fatalf("helper did not print %q within 20s", want)
		}
	}
}

// kill sends SIGKILL to the child (by its PID) and reaps it.
func (h *helper) kill(t *testing.T) {
	if h.cmd.ProcessState != nil {
		return
	}
	_ = h.cmd.Process.Kill()
	_ = h.cmd.Wait()
	for range h.lines {
	}
}

// eventually polls cond every 2 ms until it holds or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// zcard returns the size of a zset (0 when absent).
func zcard(rdb redis.Cmdable, key string) int64 {
	n, _ := rdb.ZCard(context.Background(), key).Result()
	return n
}

// scriptCalls returns how many EVAL and EVALSHA calls the server has run.
func scriptCalls(t testing.TB, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls=", "cmdstat_fcall:calls="} {
			if rest, ok := strings.CutPrefix(line, cmd); ok {
				v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				n += v
			}
		}
	}
	return n
}

// newClients returns n dlock Clients, each on its own go-redis client of addr.
func newClients(t testing.TB, addr string, n int, opts ...dlock.Config) []*dlock.Client {
	t.Helper()
	cs := make([]*dlock.Client, n)
	for i := range cs {
		rdb := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { rdb.Close() })
		cs[i] = newClient(t, rdb, opts...)
	}
	return cs
}
