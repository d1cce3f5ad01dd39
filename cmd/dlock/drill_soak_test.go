package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/drill"
)

// The soak's short version on every backend, as CI runs it (20 s, 24 s on
// Redis, which has a fifth fault): one fault of each kind strikes while 8
// workers share 4 locks, and the whole history
// must pass every check (porcupine's mutex and fenced-register models,
// tokens, the witness, the plain counters); holders that held through a
// fault were told they lost their locks; the service granted locks again
// after the faults; the report is written.
func TestDrillSoak(t *testing.T) {
	for _, kind := range backend.Kinds {
		t.Run(kind, func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "soak.html")
			duration := time.Duration(len(drill.SoakFaults[kind])+1) * 4 * time.Second
			code, out, stderr := dlock(t, "drill", "soak", "--backend", kind, "--duration", duration.String(), "--every", "4s", "--down", "2500ms",
				"--json", "--report", report)
			var res drill.SoakResult
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("exit %d, not JSON: %v\n%s\n%s", code, err, out, stderr)
			}
			if code != 0 || res.Mutex != "ok" || res.Fenced != "ok" || res.Tokens != "ok" || res.DoubleGrants != 0 || res.PlainLostUpdates != 0 {
				t.Fatalf("exit %d: mutex %q, fenced %q, tokens %q, double grants %d, plain updates lost %d\n%s",
					code, res.Mutex, res.Fenced, res.Tokens, res.DoubleGrants, res.PlainLostUpdates, stderr)
			}
			var kinds []string
			after, lost := 0, 0
			for _, f := range res.Strikes {
				kinds = append(kinds, f.Kind)
				if f.Error != "" {
					t.Errorf("fault %s at %.0f ms: %s", f.Kind, f.AtMS, f.Error)
				}
				after += f.Acquisitions
				lost += f.Lost
			}
			if want := drill.SoakFaults[kind]; !slices.Equal(kinds, want) {
				t.Errorf("faults %v, want one of each: %v", kinds, want)
			}
			if res.Acquisitions == 0 || after == 0 || res.Ops < 3*res.Acquisitions {
				t.Errorf("%d acquisitions, %d after the first fault, %d operations checked", res.Acquisitions, after, res.Ops)
			}
			if lost == 0 || res.Losses != lost {
				t.Errorf("no holder was told it lost a lock held through a fault (%d losses, %d in the faults' windows)", res.Losses, lost)
			}
			html, err := os.ReadFile(report)
			if err != nil || !strings.Contains(string(html), "<svg") || !strings.Contains(string(html), "every check passed") {
				t.Errorf("report: %v (%d bytes, want a timeline and the verdict)", err, len(html))
			}
		})
	}
}

// Bad settings are refused before any server starts (exit 2).
func TestDrillSoakBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--backend", "nope"},
		{"--faults", "partition"}, // not a Redis fault
		{"--backend", "etcd", "--faults", "latency"},
		{"--down", "5s", "--every", "5s"},
		{"--workers", "-1"},
		{"--duration", "-1s"},
		{"--shape", "rwlock"},
	} {
		code, _, stderr := dlock(t, append([]string{"drill", "soak"}, args...)...)
		if code != 2 || stderr == "" {
			t.Errorf("%v: exit %d (want 2), stderr %q", args, code, stderr)
		}
	}
}
