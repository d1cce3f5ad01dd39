package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/errline"
	"github.com/dlockgo/dlock/dlocktest"
	"github.com/dlockgo/dlock/internal/freeport"
)

// runProcess runs the command as a process of its own (this test binary
// acting as dlock: TestMain), so that what any library writes to the real
// stderr is seen too, and returns its exit code and output.
func runProcess(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := spawnSelf()(ctx, args) // as the drills start their children
	cmd.Env = append(cmd.Env, "DLOCK_REDIS_URL=", "REDIS_URL=", "DLOCK_DB=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &errb, strings.NewReader("")
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("dlock %s: %v", strings.Join(args, " "), err)
	return 0, "", ""
}

// checkErrorLine checks what every failure of the command prints on
// stderr: exactly one line, "dlock: " once, in front, no word repeating the
// word before it, no colon left dangling at the end; say, when not "", is
// named exactly once.
func checkErrorLine(stderr, say string) error {
	line := strings.TrimSuffix(stderr, "\n")
	if line == "" {
		return fmt.Errorf("want one line on stderr, got %q", stderr)
	}
	if p := dlocktest.TextProblem(line, errline.Prefix); p != "" {
		return fmt.Errorf("%s: %q", p, stderr)
	}
	if say != "" && strings.Count(line, say) != 1 {
		return fmt.Errorf("names %q %d times, want once: %q", say, strings.Count(line, say), line)
	}
	return nil
}

// Every error path of the command, each run as a process: a bad flag, a bad
// value, a bad address or URL, a server down (a free loopback port nobody
// listens on) on each backend a subcommand takes. Each exits 2 (bad input)
// or 1 (ran and failed) with one line on stderr in the command's format
// (checkErrorLine) and nothing before it: no library's log lines.
func TestErrorPaths(t *testing.T) {
	port, err := freeport.Take(false)
	if err != nil {
		t.Fatal(err)
	}
	down := fmt.Sprintf("127.0.0.1:%d", port)
	redisDown := "redis://" + down + "/0"
	dir := t.TempDir()
	db := "sqlite:" + filepath.Join(dir, "shop.db")
	noDir := filepath.Join(dir, "missing", "report.html")
	for _, tc := range []struct {
		name string
		args []string
		code int
		say  string // named once in the line ("": no check)
	}{
		// Bad flags and arguments.
		{"unknown command", []string{"nosuchcommand"}, exitUsage, "nosuchcommand"},
		{"unknown drill", []string{"drill", "nosuchdrill"}, exitUsage, ""},
		{"no drill", []string{"drill"}, exitUsage, ""},
		{"unknown flag", []string{"seckill", "--nosuch"}, exitUsage, "--nosuch"},
		{"unknown drill flag", []string{"drill", "soak", "--nosuch"}, exitUsage, "--nosuch"},
		{"flag not a number", []string{"drill", "contention", "--workers", "many"}, exitUsage, "many"},
		{"flag not a duration", []string{"drill", "soak", "--duration", "long"}, exitUsage, "long"},
		{"inspect no name", []string{"inspect"}, exitUsage, ""},
		{"unlock without --force", []string{"unlock", "a"}, exitUsage, "only --force"},
		{"unlock on etcd", []string{"unlock", "--force", "a", "--backend", "etcd"}, exitUsage, "etcd"},
		{"inspect limit without pattern", []string{"inspect", "a", "--limit", "1", "--backend", "etcd"}, exitUsage, "--limit"},
		{"flag of another backend", []string{"inspect", "a", "--etcd", down}, exitUsage, "--etcd"},
		// Bad values.
		{"zero", []string{"drill", "soak", "--duration", "0s"}, exitUsage, "--duration"},
		{"negative", []string{"seckill", "--buyers", "-5"}, exitUsage, "--buyers"},
		{"out of range", []string{"seckill", "--replicas", "5000"}, exitUsage, "--replicas"},
		{"seckill strategy", []string{"seckill", "--strategy", "nosuch"}, exitUsage, "nosuch"},
		{"seckill backend", []string{"seckill", "--backend", "foo"}, exitUsage, "foo"},
		{"drill backend", []string{"drill", "lease", "--backend", "foo"}, exitUsage, "foo"},
		{"inspect backend", []string{"inspect", "a", "--backend", "foo"}, exitUsage, "foo"},
		{"failover fault", []string{"drill", "failover", "--fault", "nosuch"}, exitUsage, "nosuch"},
		{"consensus fault", []string{"drill", "failover", "--backend", "etcd", "--fault", "nosuch"}, exitUsage, "nosuch"},
		{"soak fault", []string{"drill", "soak", "--faults", "partition"}, exitUsage, "partition"},
		{"soak down", []string{"drill", "soak", "--down", "5s", "--every", "5s"}, exitUsage, ""},
		{"serve strategy", []string{"serve", "--strategy", "nosuch"}, exitUsage, "nosuch"},
		{"serve stock", []string{"serve", "--stock", "x"}, exitUsage, "--stock"},
		{"seckill db", []string{"seckill", "--db", "mysql://nope"}, exitUsage, "--db"},
		{"report path", []string{"drill", "misdelete", "--report", noDir}, exitUsage, noDir},
		{"report is a directory", []string{"drill", "soak", "--report", dir}, exitUsage, dir},
		// Bad addresses and URLs, on each backend.
		{"seckill redis URL", []string{"seckill", "--redis", "not-a-url"}, exitUsage, "not-a-url"},
		{"drill redis URL", []string{"drill", "misdelete", "--redis", "not-a-url"}, exitUsage, "not-a-url"},
		{"inspect redis URL", []string{"inspect", "a", "--redis", "not-a-url"}, exitUsage, "not-a-url"},
		{"inspect cluster URL", []string{"inspect", "a", "--cluster", "--redis", "not-a-url"}, exitUsage, "not-a-url"},
		{"unlock redis URL", []string{"unlock", "--force", "a", "--redis", "not-a-url"}, exitUsage, "not-a-url"},
		{"serve redis URL", []string{"serve", "--redis", "not-a-url"}, exitUsage, "not-a-url"},
		{"drill etcd address", []string{"drill", "lease", "--backend", "etcd", "--etcd", "nohostport"}, exitUsage, "nohostport"},
		{"drill etcd no address", []string{"drill", "contention", "--backend", "etcd", "--etcd", ","}, exitUsage, ""},
		{"inspect etcd address", []string{"inspect", "a", "--backend", "etcd", "--etcd", "nohostport"}, exitUsage, "nohostport"},
		{"drill zk address", []string{"drill", "lease", "--backend", "zookeeper", "--zk", "nohostport"}, exitUsage, "nohostport"},
		{"inspect zk address", []string{"inspect", "a", "--backend", "zookeeper", "--zk", "nohostport"}, exitUsage, "nohostport"},
		// Servers down, on each backend.
		{"drill redis down", []string{"drill", "misdelete", "--redis", redisDown}, exitError, redisDown},
		{"pause redis down", []string{"drill", "pause", "--redis", redisDown}, exitError, redisDown},
		{"seckill redis down", []string{"seckill", "--redis", redisDown}, exitError, redisDown},
		{"serve redis down", []string{"serve", "--strategy", "lock", "--redis", redisDown, "--db", db}, exitError, redisDown},
		{"inspect redis down", []string{"inspect", "a", "--redis", redisDown}, exitError, redisDown},
		{"unlock redis down", []string{"unlock", "--force", "a", "--yes", "--redis", redisDown}, exitError, redisDown},
		{"drill etcd down", []string{"drill", "lease", "--backend", "etcd", "--etcd", down}, exitError, down},
		{"inspect etcd down", []string{"inspect", "a", "--backend", "etcd", "--etcd", down}, exitError, down},
		{"inspect pattern etcd down", []string{"inspect", "--pattern", "x*", "--backend", "etcd", "--etcd", down}, exitError, down},
		{"drill zk down", []string{"drill", "contention", "--backend", "zookeeper", "--zk", down}, exitError, down},
		{"leader zk down", []string{"drill", "leader", "--backend", "zookeeper", "--zk", down}, exitError, down},
		{"inspect zk down", []string{"inspect", "a", "--backend", "zookeeper", "--zk", down}, exitError, down},
		{"inspect pattern zk down", []string{"inspect", "--pattern", "x*", "--backend", "zookeeper", "--zk", down}, exitError, down},
		{"seckill target down", []string{"seckill", "--target", "http://" + down}, exitError, ""},
		{"seckill db down", []string{"seckill", "--db", "postgres://nobody@" + down + "/none?connect_timeout=2"}, exitError, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, _, stderr := runProcess(t, tc.args...)
			if code != tc.code {
				t.Errorf("dlock %s: exit %d, want %d (stderr %q)", strings.Join(tc.args, " "), code, tc.code, stderr)
			}
			if err := checkErrorLine(stderr, tc.say); err != nil {
				t.Errorf("dlock %s: %v", strings.Join(tc.args, " "), err)
			}
		})
	}
}

// The same bad address reads the same in every command that takes it.
func TestBadAddressSameEverywhere(t *testing.T) {
	var lines []string
	for _, args := range [][]string{
		{"seckill", "--redis", "not-a-url"},
		{"inspect", "a", "--redis", "not-a-url"},
		{"unlock", "--force", "a", "--redis", "not-a-url"},
		{"serve", "--redis", "not-a-url"},
		{"drill", "misdelete", "--redis", "not-a-url"},
	} {
		code, _, stderr := dlock(t, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		lines = append(lines, strings.TrimSpace(stderr))
	}
	for _, l := range lines[1:] {
		if l != lines[0] {
			t.Errorf("the same bad --redis reads two ways:\n  %s\n  %s", lines[0], l)
		}
	}
}

// seckill checks every flag, the addresses included, before it starts a
// server: a bad --etcd is refused without an embedded Redis being started
// (nothing is printed on stdout, where the Redis line would go).
func TestSeckillChecksBeforeStarting(t *testing.T) {
	for _, args := range [][]string{
		{"seckill", "--backend", "foo"},
		{"seckill", "--backend", "etcd", "--etcd", "nohostport"},
		{"seckill", "--backend", "zookeeper", "--zk", ","},
		{"seckill", "--strategy", "nosuch"},
	} {
		code, out, stderr := dlock(t, args...)
		if code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q (stderr %q); want 2 before anything started", args, code, out, stderr)
		}
	}
}
