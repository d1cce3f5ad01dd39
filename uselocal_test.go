package dlock_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUseLocal runs the README's recipe for using dlock before v0.1.0 ("Use
// it"), scripts/use-local.sh, on a module of a user's that imports the core and
// fence, and builds it. v0.1.0 is in no proxy, so the build can only succeed
// against this checkout; no network is used (GOPROXY=off: what the modules
// need beyond the checkout comes from the module cache the workspace's own
// builds filled). The script is run twice: the second run changes nothing.
func TestUseLocal(t *testing.T) {
	repo, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/shop\n\ngo 1.26.0\n")
	write("main.go", `package main

import (
	"fmt"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/fence"
)

func main() { fmt.Println(dlock.ErrLockLost, "|", fence.ErrStale) }
`)
	env := append(os.Environ(), "GOWORK=", "GOPROXY=off", "GOFLAGS=-buildvcs=false", "GOTOOLCHAIN=local")
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	script := filepath.Join(repo, "scripts", "use-local.sh")
	run(script, dir)
	work, err := os.ReadFile(filepath.Join(dir, "go.work"))
	if err != nil {
		t.Fatal(err)
	}
	run(script, dir)
	if again, _ := os.ReadFile(filepath.Join(dir, "go.work")); string(again) != string(work) {
		t.Errorf("a second run changed go.work:\n%s\nthen:\n%s", work, again)
	}

	run("go", "build", "-o", "shop", ".")
	if got := run(filepath.Join(dir, "shop")); got != "dlock: lock lost | dlock: stale token\n" {
		t.Errorf("the module printed %q", got)
	}
	for mod, want := range map[string]string{
		"github.com/dlockgo/dlock":       repo,
		"github.com/dlockgo/dlock/fence": filepath.Join(repo, "fence"),
	} {
		if got := strings.TrimSpace(run("go", "list", "-m", "-f", "{{.Dir}}", mod)); got != want {
			t.Errorf("%s is built from %s, want the checkout's %s", mod, got, want)
		}
	}
}
