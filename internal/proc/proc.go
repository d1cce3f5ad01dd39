// Package proc runs the server processes of the test harnesses
// (redis-server, etcd, ZooKeeper, PostgreSQL): it starts one, waits until a
// readiness probe says it serves, reaps it, and gives a test the faults it
// needs — SIGKILL, a graceful stop, SIGSTOP that returns once every thread
// of the process has stopped, SIGCONT, a restart on the same arguments —
// and the tail of its logs.
//
// Every process runs in its own process group (a Ctrl-C aimed at the test
// does not reach it), is signalled only by its own PID, and is reaped by
// one goroutine per run that ends when the process exits. Close leaves
// nothing running.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

var (
	// ErrNotRunning is returned (wrapped) by a signal to a process that is
	// not running.
	ErrNotRunning = errors.New("proc: not running")
	// ErrClosed is returned (wrapped) by Restart after Close.
	ErrClosed = errors.New("proc: closed")
	// ErrAddrInUse is returned (wrapped) when a process that failed to
	// start wrote "address already in use" to its logs during that start:
	// another process took its port, and a start on a new port may work.
	ErrAddrInUse = errors.New("proc: address already in use")
)

// Spec describes a process and how to tell that it serves.
type Spec struct {
	// Name names the process in errors, e.g. "etcd m1".
	Name string
	// Path is the program; Args its arguments (without the program name).
	Path string
	Args []string
	// Env is the environment; nil means the caller's.
	Env []string
	// Dir is the working directory; "" means the caller's.
	Dir string
	// Output is the file that gets the process's stdout and stderr
	// (created if need be, appended to); "" discards them.
	Output string
	// Logs are further files the process writes its log to. LogTail reads
	// Output and these; a start that fails is judged on what they gained.
	Logs []string
	// Credential, if set, runs the process as another user.
	Credential *syscall.Credential
	// Ready returns nil once the process (pid) serves, else why not. It is
	// called until it returns nil, the process exits, or the wait ends; nil
	// means the process counts as ready as soon as it runs.
	Ready func(ctx context.Context, pid int) error
	// ReadyTimeout bounds a wait for Ready; 0 means 30 seconds.
	ReadyTimeout time.Duration
	// StopSignals are sent in turn by Stop, each followed by a wait of
	// StopTimeout, before SIGKILL; nil means SIGTERM alone.
	StopSignals []syscall.Signal
	// StopTimeout is the wait after each stop signal; 0 means 5 seconds.
	StopTimeout time.Duration
}

// Process is a process started from a Spec; after Kill or Stop it can be
// run again by Restart. Its methods are safe for concurrent use.
type Process struct {
	spec Spec

	mu     sync.Mutex
	run    *run // the latest run; nil before the first
	paused bool
	closed bool
}

// run is one execution of the program.
type run struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and been reaped
	err  error         // what Wait returned; read after done is closed
	logs []logMark     // the logs' sizes when it started
}

// exited reports whether the run is over.
func (r *run) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// New returns a Process for spec that is not running yet (see Launch and
// Start), or an error if spec cannot be run.
func New(spec Spec) (*Process, error) {
	if spec.Path == "" {
		return nil, fmt.Errorf("proc: %s: no program to run", spec.Name)
	}
	if spec.ReadyTimeout < 0 || spec.StopTimeout < 0 {
		return nil, fmt.Errorf("proc: %s: negative timeout", spec.Name)
	}
	return &Process{spec: spec}, nil
}

// Launch starts p's program and returns at once, without waiting for it to
// be ready (see Await). It fails if p is running or closed. (A function
// rather than a method, so that a harness type that embeds a Process does
// not offer it: the harness's own Start and Restart do.)
func Launch(p *Process) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return fmt.Errorf("proc: launch of %s: %w", p.spec.Name, ErrClosed)
	}
	if p.live() != nil {
		return fmt.Errorf("proc: launch of %s: already running", p.spec.Name)
	}
	return p.launch()
}

// Start runs the program of spec and waits until it is ready (bounded by
// ctx and spec.ReadyTimeout). On failure nothing is left running and the
// error carries the tail of its logs; it wraps ErrAddrInUse when the
// process said its address was taken.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	p, err := New(spec)
	if err != nil {
		return nil, err
	}
	if err := Launch(p); err != nil {
		return nil, err
	}
	if err := p.Await(ctx); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// launch starts a new run. p.mu is held.
func (p *Process) launch() error {
	var out *os.File
	if p.spec.Output != "" {
		f, err := os.OpenFile(p.spec.Output, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("proc: %s: %w", p.spec.Name, err)
		}
		defer f.Close() // the child has its own descriptor
		out = f
	}
	cmd := exec.Command(p.spec.Path, p.spec.Args...)
	cmd.Env, cmd.Dir = p.spec.Env, p.spec.Dir
	if out != nil {
		cmd.Stdout, cmd.Stderr = out, out // a file, so Wait starts no copying goroutine
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.spec.Credential}
	r := &run{cmd: cmd, done: make(chan struct{}), logs: markLogs(p.logFiles())}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("proc: starting %s (%s): %w", p.spec.Name, p.spec.Path, err)
	}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	p.run, p.paused = r, false
	return nil
}

// live returns the current run if its process is alive. p.mu is held.
func (p *Process) live() *run {
	if p.run == nil || p.run.exited() {
		return nil
	}
	return p.run
}

// Await waits until the current run is ready: until Spec.Ready returns
// nil, bounded by ctx and Spec.ReadyTimeout. It returns an error if the
// process exits first (wrapping ErrAddrInUse when its logs say its address
// was taken) or the wait ends; it leaves the process as it is.
func (p *Process) Await(ctx context.Context) error {
	p.mu.Lock()
	r := p.run
	p.mu.Unlock()
	if r == nil {
		return fmt.Errorf("proc: %s: %w", p.spec.Name, ErrNotRunning)
	}
	timeout := p.spec.ReadyTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pid := r.cmd.Process.Pid
	backoff := 5 * time.Millisecond
	for {
		if r.exited() {
			return p.startFailure(r, fmt.Errorf("exited during start-up (%v)", r.err))
		}
		var last error
		if p.spec.Ready != nil {
			last = p.spec.Ready(ctx, pid)
		}
		if last == nil {
			if r.exited() { // it answered, then died: not ready
				continue
			}
			return nil
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return p.startFailure(r, fmt.Errorf("not ready: %w (last: %v)", ctx.Err(), last))
		case <-r.done:
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// startFailure returns err about run r with the tail of the logs, wrapping
// ErrAddrInUse if the run's output says so.
func (p *Process) startFailure(r *run, err error) error {
	if addrInUse(r.logs) {
		err = fmt.Errorf("%w (%w)", err, ErrAddrInUse)
	}
	return fmt.Errorf("proc: %s: %w\nlog tail (%s):\n%s", p.spec.Name, err, p.spec.Dir, p.LogTail())
}

// Restart kills the process if it runs and runs the program again with the
// same arguments, returning once it is ready (bounded by ctx and
// Spec.ReadyTimeout). On failure the new process is killed. After Close it
// returns ErrClosed.
func (p *Process) Restart(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return fmt.Errorf("proc: restart of %s: %w", p.spec.Name, ErrClosed)
	}
	err := p.kill()
	if err == nil {
		err = p.launch()
	}
	r := p.run
	p.mu.Unlock()
	if err != nil {
		return err
	}
	if err := p.Await(ctx); err != nil {
		p.mu.Lock()
		if p.run == r {
			_ = p.kill()
		}
		p.mu.Unlock()
		return err
	}
	return nil
}

// Close kills the process (it need not be resumed first), waits until it is
// reaped and makes Restart fail from then on. It is idempotent.
func (p *Process) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return p.kill()
}

// PID returns the pid of the running process, or 0 (also for a nil
// Process, one never launched).
func (p *Process) PID() int {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.live(); r != nil {
		return r.cmd.Process.Pid
	}
	return 0
}

// Running reports whether the process is alive (a paused one is; a nil
// Process is not).
func (p *Process) Running() bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.live() != nil
}

// Exited returns a channel closed when the current run's process has exited
// (closed already if it never ran).
func (p *Process) Exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.run == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return p.run.done
}
