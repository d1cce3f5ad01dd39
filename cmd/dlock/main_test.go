package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" { // the command as a process: a drill's child, TestErrorPaths
		os.Exit(runMain())
	}
	if spec := os.Getenv(topHolderEnv); spec != "" { // a lock holder of TestTopInBrowser
		os.Exit(topHolder(spec))
	}
	quietLibraries() // the in-process runs, as the command runs
	// toxiproxy (the failover drill's embedded proxy) can leave a link's
	// pipe goroutine blocked after its proxy is stopped; it is the library's,
	// bounded by the links of one run, and ends with the process.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/Shopify/toxiproxy/v2/toxics.(*NoopToxic).Pipe"))
}

// dlock runs the command in-process and returns its exit code and output.
func dlock(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDrillJSON(t *testing.T) {
	var res struct {
		Naive bool `json:"naive_deleted_foreign_lock"`
		Safe  bool `json:"safe_deleted_foreign_lock"`
	}
	stderr := drillJSON(t, &res, "drill", "misdelete")
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
		{"drill", "misdelete", "--redis", "not a url"},
		{"drill", "pause", "--redis", "not a url"},
		{"drill", "contention", "--backend", "etcd", "--etcd", ","},
		{"drill", "lease", "--backend", "zookeeper", "--zk", "nohostport"},
		{"seckill", "--redis", "not a url"},
		{"seckill", "--backend", "etcd", "--etcd", "nohostport"},
		{"drill", "contention", "--workers", "many"},
		{"seckill", "--strategy", "nosuch"},
		{"seckill", "--buyers", "0"},
		{"seckill", "--buyers", "-5"},
		{"seckill", "--db", "mysql://nope"},
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
	var res struct {
		Rejected  bool    `json:"paused_holder_write_rejected"`
		Clobbered bool    `json:"unfenced_write_overwrote"`
		Overlap   float64 `json:"overlap_ms"`
		Paused    float64 `json:"paused_for_ms"`
	}
	drillJSON(t, &res, "drill", "pause", "--lease", "200ms")
	if !res.Rejected || !res.Clobbered || res.Overlap <= 0 || res.Paused < 200 {
		t.Fatalf("pause figures %+v", res)
	}
}

// The main job on the embedded default: every strategy but naive sells
// exactly the stock, leaves no lock key, and its books reconcile; naive
// oversells (the bug the demo exists to show).
func TestSeckill(t *testing.T) {
	code, out, stderr := dlock(t, "seckill", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "redis:") || !strings.Contains(stderr, "database:") {
		t.Fatalf("backend lines missing from stderr: %q", stderr)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	seen := map[string]bool{}
	for dec.More() {
		var row struct {
			Strategy string  `json:"strategy"`
			Buyers   int     `json:"buyers"`
			Stock    int     `json:"stock"`
			Sold     int64   `json:"sold"`
			Oversold int64   `json:"oversold"`
			Final    int64   `json:"final_stock"`
			Leaked   int     `json:"leaked_lock_keys"`
			Rate     float64 `json:"orders_per_sec"`
			P50      float64 `json:"p50_ms"`
			P99      float64 `json:"p99_ms"`
			Clean    bool    `json:"reconcile_clean"`
			Signals  struct {
				Acquired float64 `json:"acquired"`
			} `json:"lock_signals"`
		}
		if err := dec.Decode(&row); err != nil {
			t.Fatalf("bad JSON: %v\n%s", err, out)
		}
		seen[row.Strategy] = true
		if row.Buyers != 500 || row.Stock != 10 || row.Rate <= 0 || row.P99 < row.P50 {
			t.Errorf("%s: %+v", row.Strategy, row)
		}
		if row.Strategy == "naive" {
			if row.Oversold == 0 {
				t.Errorf("naive did not oversell: %+v", row)
			}
			continue
		}
		if row.Oversold != 0 || row.Sold != 10 || row.Final != 0 || row.Leaked != 0 || !row.Clean {
			t.Errorf("%s: %+v", row.Strategy, row)
		}
		if (row.Strategy == "lock" || row.Strategy == "fenced") && row.Signals.Acquired == 0 {
			t.Errorf("%s: no lock acquisitions in the metrics", row.Strategy)
		}
	}
	if len(seen) != 6 {
		t.Fatalf("strategies run: %v, want all six", seen)
	}
}

// The failover drill at reduced scale: a crash and a partition, one run per
// mode (the partition outlasts the drill's 2 s lease, so the new master's side
// is not merely waiting out the leases and queue places copied at the fault). The fenced mode never oversells; the partition really produces
// double grants in the plain mode (the articles' incident).
func TestDrillFailover(t *testing.T) {
	for _, fault := range []string{"crash", "partition"} {
		t.Run(fault, func(t *testing.T) {
			var res struct {
				Modes map[string]struct {
					Acquisitions int     `json:"acquisitions"`
					DoubleGrants int     `json:"double_grants"`
					Oversold     int64   `json:"oversold"`
					FailoverMS   float64 `json:"failover_ms"`
				} `json:"modes"`
			}
			drillJSON(t, &res, "drill", "failover", "--fault", fault, "--runs", "1", "--before", "500ms", "--after", "300ms", "--partition", "3s")
			for _, m := range []string{"plain", "replica_ack", "fenced"} {
				x, ok := res.Modes[m]
				if !ok || x.Acquisitions == 0 || x.FailoverMS <= 0 {
					t.Errorf("%s: %+v", m, x)
				}
			}
			if x := res.Modes["fenced"]; x.Oversold != 0 {
				t.Errorf("fenced mode oversold %d", x.Oversold)
			}
			if x := res.Modes["plain"]; fault == "partition" && x.DoubleGrants == 0 {
				t.Errorf("the partition produced no double grant in plain mode: %+v", x)
			}
		})
	}
}

func TestDrillRedLock(t *testing.T) {
	var res struct {
		Double   bool  `json:"double_grant"`
		Rejected bool  `json:"older_token_write_rejected"`
		A        int64 `json:"first_token"`
		B        int64 `json:"second_token"`
	}
	drillJSON(t, &res, "drill", "redlock")
	if !res.Double || !res.Rejected || res.B <= res.A {
		t.Fatalf("redlock figures %+v", res)
	}
}

// --report writes a self-contained page whose timeline names the actors,
// not the lock's key.
func TestReportCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.html")
	code, out, stderr := dlock(t, "drill", "misdelete", "--report", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "report: "+path) {
		t.Errorf("the report's path is not printed: %q", out)
	}
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<svg class="timeline"`, `class="row-label" data-row="0"`, ">A</text>", ">B</text>", ">C</text>",
		`class="expiry"`, `class="tick-label"`, "naive: GET then DEL"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "http://", "https://"} {
		if strings.Contains(strings.ReplaceAll(string(page), `xmlns="http://www.w3.org/2000/svg"`, ""), bad) {
			t.Errorf("report is not self-contained: has %q", bad)
		}
	}
}
