package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlockgo/dlock/bench/internal/servers"
	"github.com/dlockgo/dlock/bench/internal/suite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if servers.ServeEtcdChild() {
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func TestBadFlagsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"--duration", "soon"},
		{"--rounds", "0"},
		{"--scenarios", "nope"},
		{"--libs", "no such library"},
		{"stray"},
	} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), args, &out, &errb); code != 2 {
			t.Errorf("run(%q) = %d, want 2 (stderr: %s)", args, code, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("run(%q) wrote to stdout: %q", args, out.String())
		}
	}
}

// --json prints the whole report; without it, Markdown tables.
func TestOutputs(t *testing.T) {
	args := []string{"--scenarios", "uncontended", "--libs", "floor", "--duration", "100ms", "--warmup", "0s", "--rounds", "1", "--quiet"}
	var out, errb bytes.Buffer
	if code := run(t.Context(), append(args, "--json"), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep suite.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("--json output does not decode: %v", err)
	}
	if len(rep.Tables) != 1 || len(rep.Tables[0].Rows) != 2 || rep.Tables[0].Rows[0].Median.AcqPerSec <= 0 {
		t.Fatalf("report: %+v", rep.Tables)
	}
	if rep.Machine.RedisVersion == "" || rep.Machine.Cores == 0 {
		t.Fatalf("machine not described: %+v", rep.Machine)
	}

	saved := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(saved, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}

	out.Reset()
	if code := run(t.Context(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"### Uncontended", "| floor go-redis", "| floor rueidis", "redis-server "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("tables lack %q:\n%s", want, out.String())
		}
	}

	// --render prints the same tables from the saved report.
	var rendered bytes.Buffer
	if code := run(t.Context(), []string{"--render", saved}, &rendered, &errb); code != 0 {
		t.Fatalf("--render: exit %d: %s", code, errb.String())
	}
	if !strings.Contains(rendered.String(), "| floor go-redis") {
		t.Fatalf("--render output:\n%s", rendered.String())
	}
	if code := run(t.Context(), []string{"--render", filepath.Join(t.TempDir(), "missing.json")}, &rendered, &errb); code != 2 {
		t.Fatalf("--render of a missing file: exit %d, want 2", code)
	}
}
