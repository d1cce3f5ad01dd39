package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The leader drill as a user runs it: the first line names the server, the
// killed leader is followed by another with a larger token, no two led at
// once, the report is written, and no replica process is left.
func TestDrillLeader(t *testing.T) {
	report := filepath.Join(t.TempDir(), "leader.html")
	var res struct {
		Backend        string  `json:"backend"`
		HeldSessionMS  float64 `json:"held_session_ms"`
		Overlaps       int     `json:"overlaps"`
		TokensIncrease bool    `json:"tokens_increase"`
		PIDs           []int   `json:"pids"`
		Kills          []struct {
			PID       int     `json:"pid"`
			Token     int64   `json:"token"`
			NextPID   int     `json:"next_pid"`
			NextToken int64   `json:"next_token"`
			GapMS     float64 `json:"gap_ms"`
		} `json:"kills"`
		Terms []struct {
			Replica string `json:"replica"`
			Ended   string `json:"ended"`
		} `json:"terms"`
		Observed []struct {
			Leading bool   `json:"leading"`
			Replica string `json:"replica"`
		} `json:"observed"`
		Spans []struct {
			Who string `json:"who"`
		} `json:"spans"`
	}
	stderr := drillJSON(t, &res, "drill", "leader", "--kills", "1", "--session", "1s", "--report", report)
	if !strings.HasPrefix(stderr, "redis: ") {
		t.Errorf("the first line does not name the server: %q", stderr)
	}
	if left := replicaProcesses(t); len(left) > 0 {
		t.Fatalf("replica processes left: %v", left)
	}
	if res.Backend != "redis" || res.HeldSessionMS != 1000 || len(res.PIDs) != 4 || len(res.Kills) != 1 || len(res.Terms) != 2 || len(res.Spans) != 2 {
		t.Fatalf("want 3 replicas and a replacement, one kill, two terms: %+v", res)
	}
	k := res.Kills[0]
	if res.Overlaps != 0 || !res.TokensIncrease || k.NextPID == k.PID || k.NextToken <= k.Token || k.GapMS < 0 || k.GapMS > 6000 {
		t.Fatalf("kill %+v, overlaps %d, tokens increase %v", k, res.Overlaps, res.TokensIncrease)
	}
	if res.Terms[0].Ended != "killed" || res.Terms[1].Ended != "stopped" || len(res.Observed) == 0 {
		t.Fatalf("terms %+v, observed %+v", res.Terms, res.Observed)
	}
	page, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"who led when", "SIGKILL " + res.Terms[0].Replica, "two led at once"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

func TestDrillLeaderBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"drill", "leader", "--replicas", "1"},
		{"drill", "leader", "--kills", "0"},
		{"drill", "leader", "--session", "0s"},
		{"drill", "leader", "--backend", "etcd", "--session", "500ms"},
		{"drill", "leader", "--backend", "mysql"},
		{"drill", "leader", "extra"},
		{"drill", "leader-replica", "redis", "redis://127.0.0.1:1/0", "n", "r1"},
		{"drill", "leader-replica", "redis", "redis://127.0.0.1:1/0", "n", "r1", "never"},
	} {
		code, _, stderr := dlock(t, args...)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
		if !oneLineError(stderr) {
			t.Errorf("%v: want a one-line error, got %q", args, stderr)
		}
	}
}

// replicaProcesses returns the pids of this process's children running the
// leader drill's replica, reaped or not (a zombie counts).
func replicaProcesses(t *testing.T) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if strings.Contains(string(cmdline), "leader-replica") {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
			out = append(out, pid)
		}
	}
	return out
}
