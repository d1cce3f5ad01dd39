// Package redisproc starts real redis-server processes on 127.0.0.1 for
// tests and tools: standalone servers, Sentinel setups and Cluster setups.
//
// Every process is started in its own process group (so a Ctrl-C aimed at
// the parent does not reach it), is signalled only by its own PID, and is
// reaped by a goroutine that ends when the process exits. Close stops the
// process, waits for that goroutine and removes the server's temporary
// directory, so nothing is left running after Close.
package redisproc

import (
	"context"
	"errors"
	"fmt"
	"github.com/dlockgo/dlock/internal/freeport"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoRedisServer is returned (wrapped) when redis-server is not on PATH.
var ErrNoRedisServer = errors.New("redisproc: redis-server not found on PATH; " +
	"install it with: apt-get install redis-server " +
	"(Sentinel runs the same binary with --sentinel; Debian also packages it as redis-sentinel)")

const (
	// readyTimeout caps how long a start waits for the server to answer.
	readyTimeout = 10 * time.Second
	// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	stopTimeout = 5 * time.Second
	// startAttempts is how often a start on a free port is tried when the
	// port was taken by someone else in the meantime.
	startAttempts = 5
	logName       = "redis.log"
	stdoutName    = "stdout.log"
)

var errAddrInUse = errors.New("address already in use")

// Options configures Start, StartMasters and StartCluster.
type Options struct {
	// Args are extra redis-server arguments, e.g. "--min-replicas-to-write", "1".
	Args []string
	// Dir is the parent of the server's temporary directory; "" means the
	// system temporary directory.
	Dir string
	// Port is the port to listen on; 0 picks a free one. StartMasters and
	// StartCluster ignore it.
	Port int
}

// Server is one redis-server process (standalone, replica, cluster node or
// Sentinel). Its methods are safe for concurrent use.
type Server struct {
	bin  string
	dir  string
	port int
	args []string // full redis-server arguments, reused by Restart

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has exited and been reaped
	paused bool
	closed bool
}

// Start starts a standalone redis-server without persistence (save "",
// appendonly no) listening on 127.0.0.1, logging to Dir()/redis.log, and
// returns once it answers. Startup is bounded by ctx and by 10 seconds; on
// failure the error includes the tail of the server's log. With o.Port == 0
// a port taken by another process in the meantime is retried on a new port.
func Start(ctx context.Context, o Options) (*Server, error) {
	return launch(ctx, o.Dir, o.Port, false, standaloneArgs(o.Args))
}

// StartMasters starts n independent standalone servers as Start does, each
// on its own free port. On error the servers already started are closed.
func StartMasters(ctx context.Context, n int, o Options) ([]*Server, error) {
	o.Port = 0
	var servers []*Server
	for range n {
		s, err := Start(ctx, o)
		if err != nil {
			closeAll(servers)
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// standaloneArgs returns an argv builder for a non-persistent server.
func standaloneArgs(extra []string) func(dir string, port int) ([]string, error) {
	return func(dir string, port int) ([]string, error) {
		return slices.Concat([]string{
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--protected-mode", "no",
			"--save", "",
			"--appendonly", "no",
			"--dir", dir,
			"--logfile", filepath.Join(dir, logName),
		}, extra), nil
	}
}

// launch creates a temporary directory under parent and starts redis-server
// there with the arguments from argv. With port == 0 it picks a free port
// (whose bus port is free too if bus is set) and retries on another port if
// the chosen one was taken meanwhile.
func launch(ctx context.Context, parent string, port int, bus bool, argv func(dir string, port int) ([]string, error)) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoRedisServer, err)
	}
	dir, err := os.MkdirTemp(parent, "redis-")
	if err != nil {
		return nil, fmt.Errorf("redisproc: %w", err)
	}
	for attempt := 1; ; attempt++ {
		s := &Server{bin: bin, dir: dir, port: port}
		if s.port == 0 {
			if s.port, err = freeport.Take(bus); err != nil {
				break
			}
		}
		if s.args, err = argv(dir, s.port); err != nil {
			break
		}
		// A fresh log per attempt, so only this attempt's failure is judged.
		os.Remove(filepath.Join(dir, logName))
		os.Remove(filepath.Join(dir, stdoutName))
		s.mu.Lock()
		err = s.start(ctx)
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
		if port != 0 || attempt == startAttempts || !errors.Is(err, errAddrInUse) {
			break
		}
	}
	os.RemoveAll(dir)
	return nil, err
}

// start runs the process and waits until it answers. s.mu must be held.
func (s *Server) start(ctx context.Context) error {
	out, err := os.OpenFile(filepath.Join(s.dir, stdoutName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("redisproc: %w", err)
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = out, out // files, so Wait starts no copying goroutines
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	out.Close()
	if err != nil {
		return fmt.Errorf("redisproc: starting redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	s.cmd, s.done, s.paused = cmd, done, false

	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	// INFO rather than PING: it also proves the answer comes from our
	// process and not from some other server that got the port.
	want := fmt.Sprintf("process_id:%d\r\n", cmd.Process.Pid)
	err = poll(ctx, "redis-server on "+s.Addr(), func(ctx context.Context) error {
		select {
		case <-done:
			return finalError{errors.New("redis-server exited")}
		default:
		}
		info, err := command(ctx, s.Addr(), "INFO", "server")
		if err == nil && !strings.Contains(info, want) {
			err = errors.New("another process answers on this port")
		}
		return err
	})
	if err == nil {
		return nil
	}
	s.kill()
	tail := s.logTail()
	if strings.Contains(tail, "Address already in use") {
		err = fmt.Errorf("%w (%w)", err, errAddrInUse)
	}
	return fmt.Errorf("%w\nlog tail (%s):\n%s", err, s.dir, tail)
}

// logTail returns the last lines of the server's log and stdout/stderr.
func (s *Server) logTail() string {
	var b strings.Builder
	for _, name := range []string{stdoutName, logName} {
		data, _ := os.ReadFile(filepath.Join(s.dir, name))
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		for _, l := range lines[max(0, len(lines)-15):] {
			if l != "" {
				b.WriteString(l + "\n")
			}
		}
	}
	return b.String()
}

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the port the server listens on; it never changes.
func (s *Server) Port() int { return s.port }

// Dir returns the server's temporary working directory, which holds its log
// (redis.log), its stdout/stderr (stdout.log) and any config files.
func (s *Server) Dir() string { return s.dir }

// running reports whether the process is alive. s.mu must be held.
func (s *Server) running() bool {
	if s.done == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Running reports whether the process is alive (a paused process is alive).
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running()
}

// PID returns the pid of the running process, or 0 if it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return 0
	}
	return s.cmd.Process.Pid
}

// kill sends SIGKILL and waits until the process has been reaped. s.mu
// must be held.
func (s *Server) kill() error {
	if !s.running() {
		return nil
	}
	err := s.cmd.Process.Kill()
	<-s.done
	s.paused = false
	if err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("redisproc: kill %d: %w", s.cmd.Process.Pid, err)
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to exit. It is a no-op if the
// process is not running.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kill()
}

// Stop sends SIGTERM (resuming a paused process so it sees it) and waits for
// the process to exit, sending SIGKILL after 5 seconds. It is a no-op if the
// process is not running.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return nil
	}
	if err := s.signal(syscall.SIGTERM); err != nil {
		return err
	}
	if s.paused {
		s.signal(syscall.SIGCONT)
		s.paused = false
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(stopTimeout):
		return s.kill()
	}
}

// signal sends sig to the process. s.mu must be held.
func (s *Server) signal(sig syscall.Signal) error {
	if !s.running() {
		return errors.New("redisproc: redis-server on " + s.Addr() + " is not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redisproc: %v to %d: %w", sig, s.cmd.Process.Pid, err)
	}
	return nil
}

// Pause stops the process with SIGSTOP: it keeps its port and accepts
// connections but answers nothing until Resume.
func (s *Server) Pause() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	s.paused = true
	return nil
}

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.signal(syscall.SIGCONT); err != nil {
		return err
	}
	s.paused = false
	return nil
}

// Restart kills the process if it is running and starts it again on the same
// port with the same arguments and directory, returning once it answers
// (within 10 seconds). Without persistence a restarted standalone server is
// empty; a Sentinel keeps the state it wrote to its config file, and a
// cluster node its nodes.conf.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("redisproc: restart of closed server " + s.Addr())
	}
	if err := s.kill(); err != nil {
		return err
	}
	return s.start(context.Background())
}

// Close kills the process (resuming it first if paused), waits for it to be
// reaped and removes its directory. It is idempotent; a closed server cannot
// be restarted.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.paused {
		s.signal(syscall.SIGCONT)
	}
	err := s.kill()
	return errors.Join(err, os.RemoveAll(s.dir))
}

// closeAll closes every server, joining the errors.
func closeAll(servers []*Server) error {
	var errs []error
	for _, s := range servers {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	return errors.Join(errs...)
}
