package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" { // a child process of a drill
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// dlock runs the command in-process and returns its exit code and output.
func dlock(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDrillJSON(t *testing.T) {
	code, out, stderr := dlock(t, "drill", "misdelete", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Naive bool `json:"naive_deleted_foreign_lock"`
		Safe  bool `json:"safe_deleted_foreign_lock"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if !res.Naive || res.Safe {
		t.Fatalf("misdelete figures %+v", res)
	}
	if !strings.Contains(stderr, "redis:") {
		t.Fatalf("the backend line is missing: %q", stderr)
	}
}

func TestBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"drill", "contention", "--workers", "0"},
		{"drill", "lease", "--scale", "-1"},
		{"drill", "misdelete", "--redis", "redis://127.0.0.1:1/0"},
		{"drill", "misdelete", "--redis", "not a url"},
		{"drill", "contention", "--workers", "many"},
		{"drill", "nosuchdrill", "--what"},
		{"drill", "nosuchdrill"},
		{"drill"},
		{"nosuchcommand"},
	} {
		code, _, stderr := dlock(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
		if lines := strings.Count(strings.TrimSpace(stderr), "\n"); lines > 0 {
			t.Errorf("%v: want a one-line error, got %q", args, stderr)
		}
	}
}

func TestDrillPause(t *testing.T) {
	code, out, stderr := dlock(t, "drill", "pause", "--lease", "200ms", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Rejected  bool    `json:"paused_holder_write_rejected"`
		Clobbered bool    `json:"unfenced_write_overwrote"`
		Overlap   float64 `json:"overlap_ms"`
		Paused    float64 `json:"paused_for_ms"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if !res.Rejected || !res.Clobbered || res.Overlap <= 0 || res.Paused < 200 {
		t.Fatalf("pause figures %+v", res)
	}
}
