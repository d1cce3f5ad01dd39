// Package leakcheck finds the goroutines a test binary left running.
//
// It reads every goroutine's stack with runtime.Stack and reports those that
// belong to neither the runtime (all frames in package runtime, the signal
// handler's loop) nor the testing framework (a frame in package testing), nor
// are the caller's own. Goroutines that are still winding down get until a
// deadline to end before they count as leaked.
package leakcheck

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Wait is how long Find lets goroutines end before it reports them.
const Wait = 5 * time.Second

// ErrLeaked is wrapped by Find's error when goroutines outlived the wait.
var ErrLeaked = errors.New("leakcheck: goroutines leaked")

// Find returns nil as soon as no goroutine but the caller's, the runtime's and
// the testing framework's is running. Otherwise it looks again, at growing
// intervals, until Wait has passed, then returns an error wrapping ErrLeaked
// with the stack of every goroutine still running.
func Find() error { return find(Wait) }

// VerifyTestMain runs the tests of m and exits with their code. If they
// passed, it first calls Find; a leak is printed on stderr and turns the
// exit code to 1. Call it as the whole of TestMain:
//
//	func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }
func VerifyTestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := Find(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// find is Find with the wait as a parameter.
func find(wait time.Duration) error { return until(wait, "still running", others) }

// until returns nil as soon as look finds no goroutine; otherwise it looks
// again, at growing intervals, until wait has passed, then returns an
// error wrapping ErrLeaked with the stacks look found (what says what they
// are).
func until(wait time.Duration, what string, look func() []string) error {
	deadline := time.Now().Add(wait)
	pause := time.Millisecond
	for {
		leaked := look()
		if len(leaked) == 0 {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: %d %s after %v:\n\n%s",
				ErrLeaked, len(leaked), what, wait, strings.Join(leaked, "\n\n"))
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// others returns the stacks of the goroutines that are not the caller's, the
// runtime's or the testing framework's.
func others() []string {
	var leaked []string
	for i, g := range goroutines() {
		if i == 0 { // runtime.Stack puts the caller's goroutine first
			continue
		}
		if !expected(g) {
			leaked = append(leaked, g)
		}
	}
	return leaked
}

// goroutines returns the stack of every goroutine, the caller's first, as
// runtime.Stack formats them.
func goroutines() []string {
	buf := make([]byte, 64<<10)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(strings.TrimSpace(string(buf[:n])), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// expected reports whether the goroutine whose stack is g belongs to the
// runtime or to the testing framework.
func expected(g string) bool {
	funcs := functions(g)
	runtimeOnly := len(funcs) > 0
	for _, f := range funcs {
		switch pkg := funcPackage(f); {
		case pkg == "testing" || strings.HasPrefix(pkg, "testing/"):
			return true // a test runner, or the framework's own helpers
		case f == "os/signal.signal_recv" || f == "os/signal.loop":
			return true // the signal handler, started once for the process
		case pkg != "runtime" && !strings.HasPrefix(pkg, "runtime/"):
			runtimeOnly = false
		}
	}
	return runtimeOnly
}

// functions returns the function of each frame of the stack g, innermost
// first. A stack is a "goroutine N [state]:" line, then for each frame a line
// "pkg.Func(args)" and a tab-indented "file:line" line, and at the end a
// "created by" line and its file line (not a frame).
func functions(g string) []string {
	var funcs []string
	for _, line := range strings.Split(g, "\n")[1:] {
		if line == "" || strings.HasPrefix(line, "\t") || strings.HasPrefix(line, "created by ") {
			continue
		}
		if strings.HasPrefix(line, "...") { // "...additional frames elided..."
			continue
		}
		if i := strings.LastIndexByte(line, '('); i > 0 {
			line = line[:i]
		}
		funcs = append(funcs, line)
	}
	return funcs
}

// funcPackage returns the import path of the package of the function named
// f as a stack shows it: "net/http.(*Server).Serve" is in "net/http".
func funcPackage(f string) string {
	slash := strings.LastIndexByte(f, '/') + 1
	if dot := strings.IndexByte(f[slash:], '.'); dot >= 0 {
		return f[:slash+dot]
	}
	return f
}
