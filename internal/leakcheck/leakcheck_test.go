package leakcheck

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary a child that leaks a goroutine (see TestMain).
const childEnv = "LEAKCHECK_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		block := make(chan struct{})
		go blockedForever(block)
	}
	VerifyTestMain(m)
}

// blockedForever is the function a leaked goroutine runs; its name is
// looked for in the reports.
func blockedForever(c chan struct{}) { <-c }

func TestFindNothing(t *testing.T) {
	// The caller, main (in testing.M.Run) and the test runners are expected.
	if err := find(0); err != nil {
		t.Fatalf("find with no goroutine of ours: %v", err)
	}
}

func TestFindReportsLeak(t *testing.T) {
	block := make(chan struct{})
	done := make(chan struct{})
	go func() { blockedForever(block); close(done) }()
	start := time.Now()
	err := find(300 * time.Millisecond)
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Errorf("find returned after %v, before its 300ms wait", waited)
	}
	if !errors.Is(err, ErrLeaked) {
		t.Fatalf("find with a blocked goroutine = %v, want ErrLeaked", err)
	}
	for _, want := range []string{"1 still running", "leakcheck.blockedForever", "leakcheck_test.go", "created by"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
	close(block)
	<-done
	if err := find(Wait); err != nil {
		t.Fatalf("find after the goroutine was told to end: %v", err)
	}
}

func TestFindWaitsForGoroutinesEnding(t *testing.T) {
	block := make(chan struct{})
	go blockedForever(block)
	time.AfterFunc(200*time.Millisecond, func() { close(block) })
	start := time.Now()
	if err := find(Wait); err != nil {
		t.Fatalf("find with a goroutine ending after 200ms: %v", err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond || waited > 2*time.Second {
		t.Errorf("find returned after %v; the goroutine ended after 200ms", waited)
	}
}

func TestFindIgnoresSignalLoop(t *testing.T) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR2) // starts the signal package's goroutine for the process
	defer signal.Stop(c)
	if err := find(0); err != nil {
		t.Fatalf("find with the signal loop running: %v", err)
	}
}

func TestVerifyTestMainFailsOnLeak(t *testing.T) {
	if testing.Short() {
		t.Skip("waits the full Wait in a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("child with a leaked goroutine: err %v, want exit status 1; output:\n%s", err, out)
	}
	for _, want := range []string{"leakcheck: goroutines leaked", "leakcheck.blockedForever"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output does not say %q:\n%s", want, out)
		}
	}
}

func TestFunctions(t *testing.T) {
	g := `goroutine 7 [chan receive, 2 minutes]:
github.com/dlockgo/dlock.(*Client).watch(0xc000123450, {0x9a7b20, 0xc0000a4000})
	/src/dlock/watchdog.go:88 +0x1c5
gopkg.in/tomb.v1.(*Tomb).Wait(...)
	/mod/tomb.go:10
main.run[...](0x1)
	/src/main.go:5 +0x2
...additional frames elided...
created by github.com/dlockgo/dlock.New in goroutine 1
	/src/dlock/client.go:120 +0x3f5`
	got := strings.Join(functions(g), " ")
	want := "github.com/dlockgo/dlock.(*Client).watch gopkg.in/tomb.v1.(*Tomb).Wait main.run[...]"
	if got != want {
		t.Errorf("functions = %q, want %q", got, want)
	}
	for f, pkg := range map[string]string{
		"net/http.(*Server).Serve":                         "net/http",
		"testing.tRunner":                                  "testing",
		"testing/internal/testdeps.TestDeps.RunFuzzWorker": "testing/internal/testdeps",
		"github.com/x/testing.Run":                         "github.com/x/testing",
		"runtime.gopark":                                   "runtime",
		"main.main":                                        "main",
	} {
		if got := funcPackage(f); got != pkg {
			t.Errorf("funcPackage(%q) = %q, want %q", f, got, pkg)
		}
	}
}

func TestExpected(t *testing.T) {
	for _, c := range []struct {
		stack string
		want  bool
	}{
		{"goroutine 1 [chan receive]:\ntesting.(*T).Run(0x1)\n\t/go/testing.go:1 +0x1\nmain.main()\n\t_testmain.go:1", true},
		{"goroutine 3 [syscall]:\nos/signal.signal_recv()\n\t/go/sigqueue.go:1\nos/signal.loop()\n\t/go/signal_unix.go:1", true},
		{"goroutine 2 gp=0xc000006c40 m=nil [force gc (idle)]:\nruntime.gopark(0x1)\n\t/go/proc.go:1\nruntime.forcegchelper()\n\t/go/proc.go:2", true},
		{"goroutine 9 [select]:\nmain.worker(0x1)\n\t/src/main.go:1\ncreated by testing.tRunner in goroutine 8\n\t/go/testing.go:1", false},
		{"goroutine 9 [IO wait]:\ninternal/poll.runtime_pollWait(0x1)\n\t/go/netpoll.go:1\nnet.(*conn).Read(0x1)\n\t/go/net.go:1", false},
	} {
		if got := expected(c.stack); got != c.want {
			t.Errorf("expected(%q) = %v, want %v", c.stack, got, c.want)
		}
	}
}

// TestSince: a goroutine started after the snapshot in a package asked
// for is reported until it ends; one running before it is not.
func TestSince(t *testing.T) {
	before := make(chan struct{})
	beforeDone := make(chan struct{})
	go func() { blockedForever(before); close(beforeDone) }()
	s := Take()
	ours := func(pkg string) bool { return strings.HasSuffix(pkg, "internal/leakcheck") }
	if err := s.Since(0, ours); err != nil {
		t.Fatalf("a goroutine older than the snapshot reported: %v", err)
	}
	after := make(chan struct{})
	afterDone := make(chan struct{})
	go func() { blockedForever(after); close(afterDone) }()
	if err := s.Since(100*time.Millisecond, ours); !errors.Is(err, ErrLeaked) || !strings.Contains(err.Error(), "1 started since") {
		t.Fatalf("a goroutine started after the snapshot: %v, want it reported", err)
	}
	if err := s.Since(0, func(string) bool { return false }); err != nil {
		t.Fatalf("a goroutine of a package not asked for reported: %v", err)
	}
	close(after)
	<-afterDone
	if err := s.Since(Wait, ours); err != nil {
		t.Fatalf("after the goroutine ended: %v", err)
	}
	close(before)
	<-beforeDone
}
