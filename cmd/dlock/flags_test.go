package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	dl "github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/drill"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/etcdlock"
	"github.com/dlockgo/dlock/zklock"
)

// eachFlag calls fn for every flag of every command of the tree (hidden
// commands too), with the command's arguments from the root ("drill soak").
func eachFlag(fn func(path []string, c *cobra.Command, f *pflag.Flag)) {
	var walk func(path []string, c *cobra.Command)
	walk = func(path []string, c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) { fn(path, c, f) })
		for _, sub := range c.Commands() {
			walk(append(append([]string(nil), path...), sub.Name()), sub)
		}
	}
	walk(nil, newRoot())
}

// Every number flag of every command refuses a negative value, and 0 unless
// its 0 has a meaning (allowZero, which says which), with exit 2 before the
// command does anything: the run gets a context cancelled already, so a
// command that went on would fail otherwise (exit 1). The walk covers a
// flag added tomorrow.
func TestFlagsRefuseZeroAndNegative(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	numbers, zeros := 0, 0
	eachFlag(func(path []string, c *cobra.Command, f *pflag.Flag) {
		if !numberFlag(f) {
			return
		}
		numbers++
		neg, zero := "-1", "0"
		if f.Value.Type() == "duration" {
			neg, zero = "-1s", "0s"
		}
		values := []string{neg}
		if meaning := f.Annotations[zeroMeans]; len(meaning) > 0 {
			zeros++
			if meaning[0] == "" {
				t.Errorf("%s --%s: 0 is allowed without saying what it means", strings.Join(path, " "), f.Name)
			}
			// 0 passes the flag layer: what it means is the command's.
			if err := f.Value.Set(zero); err != nil {
				t.Fatal(err)
			}
			if err := checkFlag(f); err != nil {
				t.Errorf("%s --%s 0 (%s): refused: %v", strings.Join(path, " "), f.Name, meaning[0], err)
			}
		} else {
			values = append(values, zero)
		}
		if f.Value.Type() == "uint64" || f.Value.Type() == "uint" {
			values = values[1:] // no negative to give
		}
		for _, v := range values {
			args := append(append([]string(nil), path...), "--"+f.Name+"="+v)
			var out, errb bytes.Buffer
			code := run(ctx, args, &out, &errb)
			if code != exitUsage || !strings.Contains(errb.String(), "--"+f.Name) {
				t.Errorf("dlock %s: exit %d, stderr %q; want 2 and an error naming --%s", strings.Join(args, " "), code, errb.String(), f.Name)
			}
		}
	})
	if numbers < 40 || zeros == 0 {
		t.Fatalf("the walk found %d number flags, %d taking 0: it missed the tree", numbers, zeros)
	}
}

// An output path is checked before any work: a directory that is not
// there, or a path that is a directory, exits 2 at once.
func TestOutputPathCheckedFirst(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "missing", "r.html"), dir} {
		var n int
		eachFlag(func(cmd []string, c *cobra.Command, f *pflag.Flag) {
			if len(f.Annotations[outputPath]) == 0 {
				return
			}
			n++
			args := append(append([]string(nil), cmd...), "--"+f.Name, path)
			var out, errb bytes.Buffer
			if code := run(ctx, args, &out, &errb); code != exitUsage || !strings.Contains(errb.String(), path) {
				t.Errorf("dlock %s: exit %d, stderr %q; want 2 naming the path", strings.Join(args, " "), code, errb.String())
			}
		})
		if n < 8 {
			t.Fatalf("%d output flags found; every drill has --report", n)
		}
	}
	ok := filepath.Join(dir, "r.html")
	if err := writable(ok); err != nil {
		t.Errorf("a new file in a writable directory: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the check left %d files behind", len(entries))
	}
}

// helpLine returns the line of c's help that describes --name.
func helpLine(t *testing.T, c *cobra.Command, name string) string {
	t.Helper()
	def := regexp.MustCompile(`^\s+(-\w, )?--` + regexp.QuoteMeta(name) + `( |$)`)
	for _, l := range strings.Split(c.Flags().FlagUsages(), "\n") {
		if def.MatchString(l) {
			return l
		}
	}
	t.Fatalf("%s: no help line for --%s", c.CommandPath(), name)
	return ""
}

// find returns the command at path.
func find(t *testing.T, path ...string) *cobra.Command {
	t.Helper()
	c, rest, err := newRoot().Find(path)
	if err != nil || len(rest) > 0 {
		t.Fatalf("%v: %v", path, err)
	}
	return c
}

// Each flag's default in the help is the one the command really uses: the
// drills' own defaults (a flag whose default differs per backend says each
// one, and shows no other), inspect's --prefix per backend, and no flag
// shows two defaults.
func TestHelpDefaults(t *testing.T) {
	// Every flag shows at most one default.
	eachFlag(func(path []string, c *cobra.Command, f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if n := strings.Count(helpLine(t, c, f.Name), "default"); n > 1 {
			t.Errorf("%s --%s shows %d defaults: %s", strings.Join(path, " "), f.Name, n, helpLine(t, c, f.Name))
		}
	})
	type def struct {
		path  []string
		flag  string
		value any // the real default: shown as pflag shows it
	}
	rd, cd, sd, ld := drill.FailoverDefaults(), drill.ConsensusFailoverDefaults(), drill.SoakDefaults(), drill.LeaderDefaults()
	for _, d := range []def{
		{[]string{"drill", "soak"}, "duration", sd.Duration}, {[]string{"drill", "soak"}, "workers", sd.Workers},
		{[]string{"drill", "soak"}, "names", sd.Names}, {[]string{"drill", "soak"}, "shape", sd.Shape},
		{[]string{"drill", "soak"}, "work", sd.Work}, {[]string{"drill", "soak"}, "session", sd.Session},
		{[]string{"drill", "soak"}, "every", sd.Every}, {[]string{"drill", "soak"}, "down", sd.Down},
		{[]string{"drill", "failover"}, "skus", rd.SKUs}, {[]string{"drill", "failover"}, "skus", cd.SKUs},
		{[]string{"drill", "failover"}, "section", rd.Section}, {[]string{"drill", "failover"}, "section", cd.Section},
		{[]string{"drill", "failover"}, "lease", rd.Lease}, {[]string{"drill", "failover"}, "replicas", rd.Replicas},
		{[]string{"drill", "failover"}, "partition", rd.Partition}, {[]string{"drill", "failover"}, "stale-share", rd.StaleShare},
		{[]string{"drill", "failover"}, "session", cd.Session}, {[]string{"drill", "failover"}, "down", cd.Down},
		{[]string{"drill", "leader"}, "replicas", ld.Replicas}, {[]string{"drill", "leader"}, "kills", ld.Kills},
		{[]string{"drill", "leader"}, "session", ld.Session},
		{[]string{"seckill"}, "concurrency", drill.DefaultSeckillConcurrency},
		{[]string{"serve"}, "max-qty", inventory.DefaultMaxQty}, {[]string{"serve"}, "wait", inventory.DefaultWait},
		{[]string{"serve"}, "claim-idle", inventory.DefaultClaimIdle},
		{[]string{"unlock"}, "prefix", dl.DefaultPrefix},
	} {
		c := find(t, d.path...)
		want := fmt.Sprintf("(default %v)", d.value)
		if s, ok := d.value.(string); ok {
			want = fmt.Sprintf("(default %q)", s)
		}
		if !strings.Contains(helpLine(t, c, d.flag), want) {
			t.Errorf("%s --%s: the help says %q, the real default is %v", strings.Join(d.path, " "), d.flag, helpLine(t, c, d.flag), d.value)
		}
	}
	// Defaults that differ per backend: each said, and no single one shown.
	failover := find(t, "drill", "failover")
	for flag, per := range map[string][2]any{
		"runs": {rd.Runs, cd.Runs}, "workers": {rd.Workers, cd.Workers}, "before": {rd.Before, cd.Before}, "after": {rd.After, cd.After},
	} {
		line := helpLine(t, failover, flag)
		if want := fmt.Sprintf("(default: redis %v; etcd, zookeeper %v)", per[0], per[1]); !strings.Contains(line, want) {
			t.Errorf("drill failover --%s: %q, want it to say %q", flag, line, want)
		}
	}
	line := helpLine(t, find(t, "inspect"), "prefix")
	for _, p := range []string{dl.DefaultPrefix, etcdlock.DefaultPrefix, zklock.DefaultPrefix} {
		if !strings.Contains(line, fmt.Sprintf("%q", p)) {
			t.Errorf("inspect --prefix: %q does not say the default %q", line, p)
		}
	}
	// The failover's help names every fault of each backend, once each in
	// the list of faults, and what it does.
	long := failover.Long
	for _, fault := range append([]string{"crash"}, drill.ConsensusFaults...) {
		if !strings.Contains(long, "--fault "+fault+" ") {
			t.Errorf("drill failover --help does not describe --fault %s", fault)
		}
	}
	if i := strings.Index(long, "--fault cut-clients"); i < 0 || !strings.Contains(long[i:], "clients' connections to the leader") {
		t.Error("drill failover --help: cut-clients is not the client cut")
	}
	// unlock is Redis-only: no etcd or ZooKeeper flags.
	unlock := find(t, "unlock")
	for _, flag := range []string{"etcd", "zk"} {
		if unlock.Flags().Lookup(flag) != nil {
			t.Errorf("unlock has --%s, but it is Redis-only", flag)
		}
	}
}

// fakeResult is a drill's result for output.
type fakeResult struct{ s *drill.Summary }

func (r fakeResult) Summary() *drill.Summary { return r.s }

// The results are printed before the report is written: a report that
// cannot be written (its directory gone since the check) loses nothing of
// them, is a runtime failure (exit 1), and does not hide a failed soak's
// exit 1.
func TestResultsBeforeReport(t *testing.T) {
	gone := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	f := drillFlags{report: filepath.Join(gone, "r.html")}
	if err := writable(f.report); err != nil {
		t.Fatalf("the report's path is fine before the run: %v", err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c := &cobra.Command{}
	c.SetOut(&out)
	c.SetErr(&out)
	err := f.output(c, fakeResult{&drill.Summary{Title: "the figures", Figures: []drill.Figure{{Name: "verdict", Value: "FAILED"}}}})
	if !strings.Contains(out.String(), "the figures") || !strings.Contains(out.String(), "FAILED") {
		t.Errorf("the results were not printed: %q", out.String())
	}
	var ue usageError
	if err == nil || errors.As(err, &ue) {
		t.Fatalf("a report that cannot be written: %v, want a runtime failure", err)
	}
	var code bytes.Buffer
	for _, tc := range []struct {
		ok   bool
		want int
	}{{false, exitError}, {true, exitError}} {
		exit := soakExit(tc.ok, err)
		if !tc.ok && !errors.Is(exit, errSoakFailed) {
			t.Errorf("a failed soak whose report failed: %v, want errSoakFailed", exit)
		}
		code.Reset()
		if got := runErr(exit, &code); got != tc.want || strings.Count(code.String(), "\n") != 1 {
			t.Errorf("soak ok=%v: exit %d, %q; want %d and one line", tc.ok, got, code.String(), tc.want)
		}
	}
	if soakExit(true, nil) != nil || !errors.Is(soakExit(false, nil), errSoakFailed) {
		t.Error("soakExit without a report error")
	}
}
