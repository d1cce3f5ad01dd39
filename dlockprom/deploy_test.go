package dlockprom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/observe"

	"github.com/dlockgo/dlock/dlockprom"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

const (
	alertsFile     = "../deploy/prometheus/alerts.yml"
	alertTestsFile = "../deploy/prometheus/alerts_test.yml"
	dashboardFile  = "../deploy/grafana/dlock.json"
)

// promtool returns the path of promtool, failing the test with an install
// hint when it is missing.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found on PATH (it validates deploy/prometheus): install it with: apt-get install prometheus " +
			"(Debian ships promtool in that package), or put a promtool binary from prometheus.io on PATH")
	}
	return p
}

func runPromtool(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, promtool(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// exportedNames returns every metric name a scrape of the Observer can
// show, with the _bucket, _sum and _count series of histograms.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	obs, err := dlockprom.New()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(obs)
	obs.ObserveAcquire(observe.AcquireEvent{Shape: "mutex", Name: "a:1", Result: observe.Acquired})
	obs.ObserveRelease(observe.ReleaseEvent{Shape: "mutex", Name: "a:1", Held: time.Second, Lease: 2 * time.Second, Last: true})
	obs.ObserveRelease(observe.ReleaseEvent{Shape: "mutex", Name: "a:1", Held: time.Second, Last: true})
	obs.ObserveLost(observe.LostEvent{Shape: "mutex", Name: "a:1", Reason: observe.LostExpired, Leases: 1})
	obs.ObserveRenewal(observe.RenewalEvent{Shape: "mutex", Name: "a:1", OK: true})
	obs.ObserveRenewal(observe.RenewalEvent{Shape: "mutex", Name: "a:1", Err: errors.New("timeout")})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+s] = true
			}
		}
	}
	if len(mfs) != 12 {
		t.Fatalf("gathered %d metric families, want all 12: %v", len(mfs), names)
	}
	return names
}

var metricRE = regexp.MustCompile(`\bdlock_[a-z_]+\b`)

// checkNames fails if text names a dlock_ metric the Observer does not
// export, and returns the names used.
func checkNames(t *testing.T, what, text string, exported map[string]bool) map[string]bool {
	t.Helper()
	used := map[string]bool{}
	for _, n := range metricRE.FindAllString(text, -1) {
		if !exported[n] {
			t.Errorf("%s uses %s, which dlockprom does not export", what, n)
		}
		used[strings.TrimSuffix(n, "_bucket")] = true
	}
	return used
}

// The alert rules parse, their unit tests pass (each alert fires on what
// should fire it and not on a near miss), and they use only real metrics.
func TestAlertRules(t *testing.T) {
	out := runPromtool(t, "check", "rules", alertsFile)
	if !strings.Contains(out, "SUCCESS: 6 rules found") {
		t.Fatalf("promtool check rules: %s", out)
	}
	runPromtool(t, "test", "rules", alertTestsFile)

	text, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	used := checkNames(t, alertsFile, string(text), exportedNames(t))
	for _, signal := range []string{"dlock_acquire_total", "dlock_hold_lease_ratio", "dlock_lost_total",
		"dlock_unlock_found_lost_total", "dlock_renewals_total", "dlock_lease_renewals"} {
		if !used[signal] {
			t.Errorf("no alert on %s", signal)
		}
	}
	for _, alert := range []string{"DLockAcquireFailureSpike", "DLockHoldNearLease", "DLockLeaseLost", "DLockUnlockFoundLost", "DLockRenewalStorm"} {
		if !strings.Contains(string(text), "alert: "+alert) {
			t.Errorf("alert %s missing", alert)
		}
	}
}

// The dashboard is valid JSON, every panel query is valid PromQL (checked
// by promtool with Grafana's variables filled in) and uses only metrics
// dlockprom exports, and every signal has a panel.
func TestDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Type, Title string
			Targets     []struct{ Expr string }
		}
		Templating struct{ List []struct{ Name string } }
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var exprs []string
	titles := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		titles[p.Title] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	used := checkNames(t, dashboardFile, strings.Join(exprs, "\n"), exportedNames(t))
	for n := range exportedNames(t) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")
		if !used[base] && n == base {
			t.Errorf("no panel shows %s", n)
		}
	}
	for _, v := range []string{"datasource", "group", "shape"} {
		if !slices.ContainsFunc(dash.Templating.List, func(x struct{ Name string }) bool { return x.Name == v }) {
			t.Errorf("dashboard variable $%s missing", v)
		}
	}

	// Grafana's variables replaced by values, each query becomes a
	// recording rule, and promtool parses them all.
	repl := strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$group", ".*", "$shape", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(repl.Replace(e))
		fmt.Fprintf(&rules, "      - record: dashboard_query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard_rules.yml")
	if err := os.WriteFile(path, []byte(rules.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := runPromtool(t, "check", "rules", path); !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(exprs))) {
		t.Fatalf("promtool on the dashboard's queries: %s", out)
	}
}
