package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The children these tests run are the test binary itself, re-executed with
// childEnv naming what it should do.
const childEnv = "PROC_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		child(mode)
		return
	}
	os.Exit(m.Run())
}

// child is the re-executed test binary.
func child(mode string) {
	switch mode {
	case "serve": // says it is up, says bye on SIGTERM
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		cwd, _ := os.Getwd()
		fmt.Printf("up pid=%d cwd=%s greeting=%s\n", os.Getpid(), cwd, os.Getenv("GREETING"))
		<-term
		fmt.Println("bye")
		os.Exit(0)
	case "stubborn": // ignores SIGTERM
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("up")
		select {}
	case "spin": // keeps 4 threads busy
		for range 4 {
			go func() {
				runtime.LockOSThread()
				for {
				}
			}()
		}
		fmt.Println("up")
		select {}
	case "inuse":
		fmt.Fprintln(os.Stderr, "listen tcp 127.0.0.1:1: bind: Address already in use")
		os.Exit(1)
	case "exit3":
		fmt.Println("failing")
		os.Exit(3)
	}
	os.Exit(2)
}

// spec returns a Spec that runs the test binary as a child in mode, with
// its output in a file of t's and ready once it printed "up".
func spec(t *testing.T, mode string) Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.log")
	return Spec{
		Name:   "child " + mode,
		Path:   exe,
		Env:    append(os.Environ(), childEnv+"="+mode, "GREETING=hello"),
		Dir:    dir,
		Output: out,
		Ready: func(ctx context.Context, pid int) error {
			b, _ := os.ReadFile(out)
			if !strings.Contains(string(b), "up") {
				return errors.New("not up yet")
			}
			return nil
		},
		ReadyTimeout: 20 * time.Second,
	}
}

func start(t *testing.T, s Spec) *Process {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// gone reports whether pid no longer exists (it was reaped).
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

func TestStartKillRestartClose(t *testing.T) {
	s := spec(t, "serve")
	p := start(t, s)
	pid := p.PID()
	if pid == 0 || !p.Running() {
		t.Fatalf("after Start: pid %d, running %v", pid, p.Running())
	}
	tail := p.LogTail()
	if !strings.Contains(tail, "up pid="+strconv.Itoa(pid)) || !strings.Contains(tail, "cwd="+s.Dir) ||
		!strings.Contains(tail, "greeting=hello") {
		t.Fatalf("the child's output does not show its pid, directory and environment: %q", tail)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() || p.PID() != 0 || !gone(pid) {
		t.Fatalf("after Kill: running %v, pid %d, pid %d gone %v", p.Running(), p.PID(), pid, gone(pid))
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("Exited is open after Kill")
	}
	if err := p.Kill(); err != nil {
		t.Fatalf("Kill of a dead process: %v", err)
	}
	for _, f := range []func() error{p.Pause, p.Resume} {
		if err := f(); !errors.Is(err, ErrNotRunning) {
			t.Fatalf("a signal to a dead process: %v, want ErrNotRunning", err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	again := p.PID()
	if again == 0 || again == pid {
		t.Fatalf("after Restart: pid %d (was %d)", again, pid)
	}
	// Restart of a running process replaces it.
	if err := p.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if p.PID() == again || !gone(again) {
		t.Fatalf("Restart of a running process: pid %d, old %d gone %v", p.PID(), again, gone(again))
	}
	last := p.PID()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if !gone(last) {
		t.Fatalf("pid %d left after Close", last)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := p.Restart(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Restart after Close: %v, want ErrClosed", err)
	}
}

func TestStopIsGraceful(t *testing.T) {
	p := start(t, spec(t, "serve"))
	pid := p.PID()
	t0 := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if !gone(pid) || p.Running() {
		t.Fatalf("pid %d left after Stop", pid)
	}
	if !strings.Contains(p.LogTail(), "bye") {
		t.Fatalf("the child did not see SIGTERM: %q", p.LogTail())
	}
	if d := time.Since(t0); d > 4*time.Second {
		t.Fatalf("Stop of a process that exits on SIGTERM took %v", d)
	}
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop of a stopped process: %v", err)
	}
}

// A paused process is continued by Stop, so it sees the signal.
func TestStopPaused(t *testing.T) {
	p := start(t, spec(t, "serve"))
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.LogTail(), "bye") {
		t.Fatalf("the paused child did not see SIGTERM: %q", p.LogTail())
	}
}

// A process that ignores SIGTERM is killed after StopTimeout.
func TestStopKillsAfterTimeout(t *testing.T) {
	s := spec(t, "stubborn")
	s.StopTimeout = 300 * time.Millisecond
	p := start(t, s)
	pid := p.PID()
	t0 := time.Now()
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	d := time.Since(t0)
	if !gone(pid) {
		t.Fatalf("pid %d left after Stop", pid)
	}
	if d < s.StopTimeout {
		t.Fatalf("Stop returned after %v, before the %v bound: the child ignores SIGTERM", d, s.StopTimeout)
	}
}

// cpuTicks returns the user and system time of pid.
func cpuTicks(t *testing.T, pid int) time.Duration {
	t.Helper()
	d, err := CPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Pause returns only once every thread of a multi-threaded process has
// stopped: none of them runs (no CPU time) until Resume.
func TestPauseStopsEveryThread(t *testing.T) {
	p := start(t, spec(t, "spin"))
	pid := p.PID()
	for deadline := time.Now().Add(10 * time.Second); ; {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
		if len(tasks) >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child has %d threads, want at least 5", len(tasks))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 3 {
		if err := p.Pause(); err != nil {
			t.Fatal(err)
		}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		for _, task := range tasks {
			if st, err := threadState(task); err == nil && st != 'T' {
				t.Fatalf("thread %s is in state %c after Pause returned", task, st)
			}
		}
		before := cpuTicks(t, pid)
		time.Sleep(300 * time.Millisecond)
		if d := cpuTicks(t, pid) - before; d != 0 {
			t.Fatalf("a paused process ran for %d ticks", d)
		}
		if err := p.Resume(); err != nil {
			t.Fatal(err)
		}
		before = cpuTicks(t, pid)
		deadline := time.Now().Add(5 * time.Second)
		for cpuTicks(t, pid) == before {
			if time.Now().After(deadline) {
				t.Fatal("a resumed process does not run")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if ok, err := Stopped(pid); err != nil || ok {
			t.Fatalf("Stopped after Resume: %v, %v", ok, err)
		}
	}
}

func TestExitDuringStartUp(t *testing.T) {
	s := spec(t, "exit3")
	_, err := Start(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "exited during start-up") || !strings.Contains(err.Error(), "exit status 3") ||
		!strings.Contains(err.Error(), "failing") {
		t.Fatalf("a child that exits at once: %v; want the exit status and the log tail", err)
	}
	if errors.Is(err, ErrAddrInUse) {
		t.Fatalf("ErrAddrInUse without the words in the log: %v", err)
	}
}

func TestAddrInUse(t *testing.T) {
	s := spec(t, "inuse")
	_, err := Start(context.Background(), s)
	if !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("a child that could not bind: %v, want ErrAddrInUse", err)
	}
	// The same log, a run that fails otherwise: only this run's output
	// counts.
	s.Env = append(os.Environ(), childEnv+"=exit3")
	if _, err := Start(context.Background(), s); err == nil || errors.Is(err, ErrAddrInUse) {
		t.Fatalf("a later run that fails for another reason: %v; want an error without ErrAddrInUse", err)
	}
	n := 0
	_, err = Retry(3, func() (*Process, error) {
		n++
		s.Env = append(os.Environ(), childEnv+"=inuse")
		return Start(context.Background(), s)
	})
	if n != 3 || !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("Retry: %d attempts, %v; want 3 and ErrAddrInUse", n, err)
	}
	n = 0
	_, err = Retry(3, func() (*Process, error) {
		n++
		s.Env = append(os.Environ(), childEnv+"=exit3")
		return Start(context.Background(), s)
	})
	if n != 1 || err == nil {
		t.Fatalf("Retry of another failure: %d attempts, %v; want 1 and the error", n, err)
	}
}

// A process that never gets ready is killed by Start once the wait ends.
func TestReadyTimeout(t *testing.T) {
	s := spec(t, "serve")
	s.ReadyTimeout = 300 * time.Millisecond
	var pid int
	s.Ready = func(ctx context.Context, p int) error {
		pid = p
		return errors.New("never")
	}
	_, err := Start(context.Background(), s)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "never") {
		t.Fatalf("a child that never gets ready: %v, want DeadlineExceeded with the probe's last error", err)
	}
	if pid == 0 || !gone(pid) {
		t.Fatalf("the child (pid %d) was left running after a failed Start", pid)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("Start with a cancelled ctx: %v, want context.Canceled", err)
	}
}

func TestBadSpec(t *testing.T) {
	if _, err := New(Spec{Name: "nothing"}); err == nil {
		t.Fatal("a Spec without a program")
	}
	s := spec(t, "serve")
	s.ReadyTimeout = -time.Second
	if _, err := New(s); err == nil {
		t.Fatal("a Spec with a negative timeout")
	}
	if _, err := Start(context.Background(), Spec{Name: "missing", Path: "/nonexistent/program"}); err == nil {
		t.Fatal("a missing program started")
	}
	s = spec(t, "serve")
	s.Output = filepath.Join(s.Dir, "no", "such", "dir", "out.log")
	if _, err := Start(context.Background(), s); err == nil {
		t.Fatal("started with an output file that cannot be created")
	}

	// Launch of a running process, of a closed one.
	p := start(t, spec(t, "serve"))
	if err := Launch(p); err == nil {
		t.Fatal("Launch of a running process")
	}
	pid := p.PID()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := Launch(p); !errors.Is(err, ErrClosed) || !gone(pid) {
		t.Fatalf("Launch after Close: %v, want ErrClosed", err)
	}
}
