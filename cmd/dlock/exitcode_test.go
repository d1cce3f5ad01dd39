package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// oneLineError reports whether stderr holds exactly one line besides the
// lines that name the server a command used ("redis: …", "etcd: …",
// "zookeeper: …").
func oneLineError(stderr string) bool {
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if !strings.HasPrefix(l, "redis: ") && !strings.HasPrefix(l, "etcd: ") && !strings.HasPrefix(l, "zookeeper: ") {
			n++
		}
	}
	return n == 1
}

// A server that does not answer is a runtime failure, whatever the command:
// exit 1 with a one-line error naming it (docs/DRILLS.md: 1 = failed, e.g.
// Redis down; 2 = bad input). Only bad input exits 2 (TestBadInput,
// TestDrillBackendBadInput, TestServeBadFlags, TestInspectUnlockExitCodes).
func TestServerDownExitsOne(t *testing.T) {
	const redisDown, down = "redis://127.0.0.1:1/0", "127.0.0.1:1"
	db := "sqlite:" + filepath.Join(t.TempDir(), "shop.db")
	for _, tc := range []struct {
		args []string
		says string // what the error names
	}{
		{[]string{"drill", "misdelete", "--redis", redisDown}, "127.0.0.1:1"},
		{[]string{"drill", "lease", "--redis", redisDown}, "127.0.0.1:1"},
		{[]string{"drill", "contention", "--redis", redisDown}, "127.0.0.1:1"},
		{[]string{"drill", "pause", "--redis", redisDown}, "127.0.0.1:1"},
		{[]string{"drill", "lease", "--backend", "etcd", "--etcd", down}, `connect etcd "127.0.0.1:1": unreachable`},
		{[]string{"drill", "contention", "--backend", "etcd", "--etcd", down}, `connect etcd "127.0.0.1:1": unreachable`},
		{[]string{"drill", "pause", "--backend", "zookeeper", "--zk", down}, `connect zookeeper "127.0.0.1:1": unreachable`},
		{[]string{"seckill", "--redis", redisDown}, "127.0.0.1:1"},
		{[]string{"seckill", "--backend", "etcd", "--etcd", down}, `connect etcd "127.0.0.1:1": unreachable`},
		{[]string{"seckill", "--target", "http://127.0.0.1:1"}, "unreachable"},
		{[]string{"seckill", "--db", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}, "--db"},
		{[]string{"serve", "--strategy", "lock", "--redis", redisDown, "--db", db}, "127.0.0.1:1"},
		{[]string{"serve", "--redis", redisDown, "--db", "postgres://nobody@127.0.0.1:1/none?connect_timeout=2"}, "--db"},
		{[]string{"inspect", "a", "--redis", redisDown}, "127.0.0.1:1"},
		{[]string{"unlock", "--force", "a", "--yes", "--redis", redisDown}, "127.0.0.1:1"},
	} {
		t.Run(strings.Join(tc.args[:2], " "), func(t *testing.T) {
			code, _, stderr := dlock(t, tc.args...)
			if code != exitError {
				t.Errorf("%v: exit %d, want %d (stderr %q)", tc.args, code, exitError, stderr)
			}
			if !oneLineError(stderr) || !strings.Contains(stderr, tc.says) {
				t.Errorf("%v: want a one-line error naming %q, got %q", tc.args, tc.says, stderr)
			}
		})
	}
}
