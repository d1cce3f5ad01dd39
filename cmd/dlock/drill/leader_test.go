package drill_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/drill"
)

// spawnReplica runs TestLeaderReplicaProcess in a child process: the
// drill's replica, as the dlock command runs it.
func spawnReplica(ctx context.Context, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], append([]string{"-test.run=^TestLeaderReplicaProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "DRILL_LEADER_REPLICA=1")
	cmd.Stderr = os.Stderr
	return cmd
}

// TestLeaderReplicaProcess is the child process of the leader drill's
// tests (run with DRILL_LEADER_REPLICA=1); by itself it does nothing.
func TestLeaderReplicaProcess(t *testing.T) {
	if os.Getenv("DRILL_LEADER_REPLICA") != "1" {
		return
	}
	i := slices.Index(os.Args, "--")
	a, err := drill.ParseLeaderReplicaArgs(os.Args[i+1:])
	if err == nil {
		var in io.Reader = os.Stdin
		var out io.Writer = os.Stdout
		if d, _ := time.ParseDuration(os.Getenv("DRILL_LEADER_FOLLOWER_SLOW_STOP")); d > 0 {
			in, out = followerSlowStop(d)
		}
		err = drill.LeaderReplica(context.Background(), a, in, out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "leader replica:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// followerSlowStop returns the replica's stdin and stdout for a replica
// that, while it does not lead, notices its stdin closing only d later (a
// process slow to be scheduled); it tells whether it leads from its own
// "term" and "end" lines.
func followerSlowStop(d time.Duration) (io.Reader, io.Writer) {
	var leading atomic.Bool
	in := readerFunc(func(p []byte) (int, error) {
		n, err := os.Stdin.Read(p)
		if err == io.EOF && !leading.Load() {
			time.Sleep(d)
		}
		return n, err
	})
	out := writerFunc(func(p []byte) (int, error) {
		switch {
		case bytes.HasPrefix(p, []byte("term ")):
			leading.Store(true)
		case bytes.HasPrefix(p, []byte("end ")):
			leading.Store(false)
		}
		return os.Stdout.Write(p)
	})
	return in, out
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// replicaChildren returns the pids of this process's children that run a
// leader replica, reaped or not (a zombie counts: it was not reaped).
func replicaChildren(t *testing.T) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after the last ')'.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if strings.Contains(string(cmdline), "TestLeaderReplicaProcess") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, pid)
		}
	}
	return out
}

// The leader drill on every backend, with real processes: each SIGKILL of
// the leader is followed by a new leader within the session (plus slack for
// a loaded machine), no two terms overlap, tokens strictly increase,
// Observe saw every killed leader, and no replica process is left.
func TestLeaderOnEveryBackend(t *testing.T) {
	const session = time.Second
	for _, kind := range backend.Kinds {
		t.Run(kind, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			res, err := drill.Leader(ctx, openBackend(t, kind), drill.LeaderOptions{Replicas: 3, Kills: 2, Session: session, Spawn: spawnReplica})
			if err != nil {
				t.Fatal(err)
			}
			checkClaims(t, res.Summary())
			if left := replicaChildren(t); len(left) > 0 {
				t.Fatalf("replica processes left after the drill: %v", left)
			}
			if res.Backend != kind || len(res.Kills) != 2 || len(res.PIDs) != 5 || len(res.Terms) != 3 {
				t.Fatalf("want 2 kills, 5 processes (3 + 2 replacements) and 3 terms: %+v", res)
			}
			if res.HeldSessionMS != 1000 {
				t.Errorf("held session %.0f ms, want the 1 s asked for (the embedded servers grant it)", res.HeldSessionMS)
			}
			if res.Overlaps != 0 || drill.DoubleGrants(res.Spans) != 0 {
				t.Errorf("two replicas led at once: %d overlapping terms\n%+v", res.Overlaps, res.Terms)
			}
			if !res.TokensIncrease {
				t.Errorf("tokens do not strictly increase: %+v", res.Terms)
			}
			for i := 1; i < len(res.Terms); i++ {
				if a, b := res.Terms[i-1], res.Terms[i]; b.Token <= a.Token || b.StartMS < a.EndMS {
					t.Errorf("term %d (%+v) after %+v: want a larger token, begun after the other ended", i, b, a)
				}
			}
			// Bound: the session, etcd's 500 ms expiry loop, then slack for
			// a loaded 2-core machine (a wake-up, a replica's scheduling).
			bound := float64(session.Milliseconds()) + 500 + 5000
			for i, k := range res.Kills {
				if k.GapMS < 0 || k.GapMS > bound {
					t.Errorf("kill %d: gap %.1f ms, want a new leader within %.0f ms: %+v", i+1, k.GapMS, bound, k)
				}
				if k.NextPID == k.PID || k.NextToken <= k.Token || k.DeadMS < k.AtMS {
					t.Errorf("kill %d: %+v", i+1, k)
				}
				term := res.Terms[i]
				if term.PID != k.PID || term.Ended != "killed" || term.EndMS != k.DeadMS || !term.Observed {
					t.Errorf("kill %d: the killed leader's term %+v: want it ended at its reaping (%.1f ms), observed", i+1, term, k.DeadMS)
				}
			}
			if last := res.Terms[len(res.Terms)-1]; last.Ended != "stopped" || !last.Observed {
				t.Errorf("the last term %+v: want stopped at the drill's end, observed", last)
			}
			for _, s := range res.Observed {
				if s.Leading && (s.Replica == "" || s.Label != s.Replica) {
					t.Errorf("Observe saw a holder %+v that is not a replica (its label is its name)", s)
				}
			}
		})
	}
}

// At its end the drill stops the replicas without handing leadership on:
// a follower slow to notice that it must stop (here 1.5 s) is not elected
// by the leader's release, so the drill's terms are the kills' and the
// last one, ended "stopped".
func TestLeaderStopsWithoutHandOff(t *testing.T) {
	spawn := func(ctx context.Context, args []string) *exec.Cmd {
		cmd := spawnReplica(ctx, args)
		cmd.Env = append(cmd.Env, "DRILL_LEADER_FOLLOWER_SLOW_STOP=1500ms")
		return cmd
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := drill.Leader(ctx, openRedis(t), drill.LeaderOptions{Replicas: 3, Kills: 1, Session: time.Second, Spawn: spawn})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Terms) != 2 || res.Terms[0].Ended != "killed" || res.Terms[1].Ended != "stopped" {
		t.Fatalf("terms %+v: want the killed leader's and its successor's, stopped at the end", res.Terms)
	}
	if left := replicaChildren(t); len(left) > 0 {
		t.Fatalf("replica processes left: %v", left)
	}
}

// A drill whose ctx is cancelled mid-run returns ctx's error, with every
// replica process killed and reaped.
func TestLeaderCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := drill.Leader(ctx, openRedis(t), drill.LeaderOptions{Kills: 3, Session: 500 * time.Millisecond, Spawn: spawnReplica,
		Progress: func(string, int, int) { cancel() }}) // after the first kill
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Leader = %v, want context.Canceled", err)
	}
	if left := replicaChildren(t); len(left) > 0 {
		t.Fatalf("replica processes left after a cancelled drill: %v", left)
	}
}

// Replicas that cannot reach the lock service exit: the drill says so and
// leaves no process behind. Bad options are refused.
func TestLeaderFailures(t *testing.T) {
	b := openRedis(t)
	if err := b.Close(); err != nil { // the server is gone; b.Addr still names it
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := drill.Leader(ctx, b, drill.LeaderOptions{Kills: 1, Spawn: spawnReplica})
	if err == nil || !strings.Contains(err.Error(), "exited on its own") {
		t.Fatalf("Leader on a stopped server = %v, want a replica that exited", err)
	}
	if left := replicaChildren(t); len(left) > 0 {
		t.Fatalf("replica processes left: %v", left)
	}
	for _, o := range []drill.LeaderOptions{
		{Replicas: 1, Spawn: spawnReplica},
		{Kills: -1, Spawn: spawnReplica},
		{Session: -time.Second, Spawn: spawnReplica},
		{},
	} {
		if _, err := drill.Leader(ctx, b, o); err == nil {
			t.Errorf("Leader(%+v) = nil error", o)
		}
	}
	etcd := &backend.Backend{Kind: backend.Etcd, Addr: "127.0.0.1:1"}
	if _, err := drill.Leader(ctx, etcd, drill.LeaderOptions{Session: 500 * time.Millisecond, Spawn: spawnReplica}); err == nil || !strings.Contains(err.Error(), "whole seconds") {
		t.Errorf("a 500 ms session on etcd: %v, want refused", err)
	}
	for _, args := range [][]string{
		{"redis", "redis://x", "n", "r1"},
		{"redis", "redis://x", "n", "r1", "soon"},
		{"redis", "redis://x", "n", "r1", "0s"},
		{"redis", "redis://x", "", "r1", "1s"},
	} {
		if _, err := drill.ParseLeaderReplicaArgs(args); err == nil {
			t.Errorf("ParseLeaderReplicaArgs(%q) = nil error", args)
		}
	}
}
