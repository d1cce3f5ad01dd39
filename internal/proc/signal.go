package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// pauseTimeout bounds the wait for every thread to stop after SIGSTOP.
const pauseTimeout = 5 * time.Second

// signal sends sig to the running process. p.mu is held.
func (p *Process) signal(sig syscall.Signal) error {
	r := p.live()
	if r == nil {
		return fmt.Errorf("proc: %v to %s: %w", sig, p.spec.Name, ErrNotRunning)
	}
	if err := r.cmd.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("proc: %v to %s: %w", sig, p.spec.Name, ErrNotRunning)
		}
		return fmt.Errorf("proc: %v to %s (pid %d): %w", sig, p.spec.Name, r.cmd.Process.Pid, err)
	}
	return nil
}

// kill sends SIGKILL to the running process and waits until it is reaped;
// nothing if it is not running. p.mu is held.
func (p *Process) kill() error {
	r := p.live()
	p.paused = false
	if r == nil {
		return nil
	}
	err := r.cmd.Process.Kill()
	<-r.done
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("proc: kill %s (pid %d): %w", p.spec.Name, r.cmd.Process.Pid, err)
	}
	return nil
}

// Kill sends SIGKILL and returns once the process has exited; nothing if
// it is not running.
func (p *Process) Kill() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kill()
}

// Stop asks the process to exit with each of Spec.StopSignals in turn
// (SIGTERM by default; a paused process is continued so that it sees
// them), waiting Spec.StopTimeout after each, then sends SIGKILL. It
// returns once the process has exited; nothing if it is not running.
func (p *Process) Stop() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.live()
	if r == nil {
		return nil
	}
	sigs := p.spec.StopSignals
	if sigs == nil {
		sigs = []syscall.Signal{syscall.SIGTERM}
	}
	wait := p.spec.StopTimeout
	if wait == 0 {
		wait = 5 * time.Second
	}
	for _, sig := range sigs {
		if err := p.signal(sig); err != nil {
			if errors.Is(err, ErrNotRunning) {
				break
			}
			return err
		}
		if p.paused {
			_ = p.signal(syscall.SIGCONT)
			p.paused = false
		}
		t := time.NewTimer(wait)
		select {
		case <-r.done:
			t.Stop()
			return nil
		case <-t.C:
		}
	}
	return p.kill()
}

// Pause stops the process with SIGSTOP and returns once every thread of it
// has stopped (a signal is delivered after kill(2) returns, thread by
// thread): from then on it keeps its sockets and accepts connections but
// runs nothing until Resume.
func (p *Process) Pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	p.paused = true
	pid := p.run.cmd.Process.Pid
	deadline := time.Now().Add(pauseTimeout)
	for {
		stopped, err := Stopped(pid)
		if err != nil || stopped {
			return err
		}
		if p.run.exited() {
			return fmt.Errorf("proc: pause %s: %w", p.spec.Name, ErrNotRunning)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("proc: %s (pid %d) not stopped %v after SIGSTOP", p.spec.Name, pid, pauseTimeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Resume continues a paused process with SIGCONT.
func (p *Process) Resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.signal(syscall.SIGCONT); err != nil {
		return err
	}
	p.paused = false
	return nil
}

// Stopped reports whether /proc says every thread of pid is stopped (state
// T or t) or gone (Z, X).
func Stopped(pid int) (bool, error) {
	tasks, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "stat"))
	if err != nil || len(tasks) == 0 {
		return false, fmt.Errorf("proc: reading the threads of pid %d: %v", pid, err)
	}
	for _, t := range tasks {
		st, err := threadState(t)
		if err != nil {
			continue // a thread that ended
		}
		switch st {
		case 'T', 't', 'Z', 'X':
		default:
			return false, nil
		}
	}
	return true, nil
}

// threadState returns the state letter in a /proc/.../stat file: "pid
// (comm) S ...", where comm may hold spaces and parentheses.
func threadState(path string) (byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			if i+2 < len(b) {
				return b[i+2], nil
			}
			break
		}
	}
	return 0, fmt.Errorf("proc: unexpected %s: %q", path, b)
}
