// Package zkproc starts real ZooKeeper servers (Debian's zookeeper package,
// 3.8) on 127.0.0.1 for tests and tools: one standalone server, or an
// ensemble of several.
//
// Every server is a JVM started in its own process group with a small heap
// (-Xmx128m -Xms32m -XX:+UseSerialGC), signalled only by its own PID and
// reaped by a goroutine that ends when it exits. A server counts as started
// once the srvr four-letter command reports it serving (ruok answers too
// early). Close stops the process and removes its directory.
package zkproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dlockgo/dlock/internal/freeport"
)

// ErrNoZooKeeper is returned (wrapped) when java or the ZooKeeper jars are
// missing.
var ErrNoZooKeeper = errors.New("zkproc: ZooKeeper is not installed; install it with: " +
	"apt-get install -y --no-install-recommends zookeeper (it brings a Java runtime and /usr/share/java/zookeeper.jar)")

// Jar is where Debian's libzookeeper-java puts the server jar; its manifest
// names the rest of the classpath except the logger.
const (
	Jar       = "/usr/share/java/zookeeper.jar"
	loggerJar = "/usr/share/java/slf4j-simple.jar"
)

const (
	readyTimeout = 60 * time.Second // JVM start-up on a loaded 2-core machine
	stopTimeout  = 10 * time.Second
	logName      = "zookeeper.log"
)

// Options configure Start and StartEnsemble.
type Options struct {
	// ForceSync keeps the transaction log's fsync on (ZooKeeper's default);
	// false starts the server with -Dzookeeper.forceSync=no.
	ForceSync bool
	// TickTime is ZooKeeper's tick (the session timeout is negotiated
	// between 2 and 20 ticks); 0 means 2s.
	TickTime time.Duration
	// Dir is the parent of the servers' temporary directories; "" means the
	// system temporary directory.
	Dir string
}

// Server is one ZooKeeper process. Its methods are safe for concurrent use.
type Server struct {
	dir   string
	port  int
	id    int // myid in an ensemble; 0 standalone
	java  string
	flags []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	paused bool
	closed bool
}

// Start starts a standalone server and returns once it serves.
func Start(ctx context.Context, o Options) (*Server, error) {
	java, err := lookJava()
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		s, err := newServer(o, java, 0)
		if err != nil {
			return nil, err
		}
		if err = s.writeConfig(o, nil); err == nil {
			err = s.start(ctx, "standalone")
		}
		if err == nil {
			return s, nil
		}
		s.Close()
		if attempt == 3 || !errors.Is(err, errAddrInUse) {
			return nil, err
		}
	}
}

// lookJava finds java and the ZooKeeper jar, or returns ErrNoZooKeeper.
func lookJava() (string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return "", fmt.Errorf("%w (java: %v)", ErrNoZooKeeper, err)
	}
	if _, err := os.Stat(Jar); err != nil {
		return "", fmt.Errorf("%w (%v)", ErrNoZooKeeper, err)
	}
	return java, nil
}

func newServer(o Options, java string, id int) (*Server, error) {
	dir, err := os.MkdirTemp(o.Dir, "zookeeper-")
	if err != nil {
		return nil, fmt.Errorf("zkproc: %w", err)
	}
	port, err := freeport.Take(false)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("zkproc: %w", err)
	}
	s := &Server{dir: dir, port: port, id: id, java: java}
	s.flags = []string{"-Xmx128m", "-Xms32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	if !o.ForceSync {
		s.flags = append(s.flags, "-Dzookeeper.forceSync=no")
	}
	return s, nil
}

// writeConfig writes zoo.cfg (and myid for an ensemble member).
func (s *Server) writeConfig(o Options, members []string) error {
	tick := o.TickTime
	if tick <= 0 {
		tick = 2 * time.Second
	}
	data := filepath.Join(s.dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return fmt.Errorf("zkproc: %w", err)
	}
	cfg := []string{
		"tickTime=" + strconv.FormatInt(tick.Milliseconds(), 10),
		"dataDir=" + data,
		"clientPort=" + strconv.Itoa(s.port),
		"clientPortAddress=127.0.0.1",
		"maxClientCnxns=0",
		"admin.enableServer=false",
		"4lw.commands.whitelist=srvr,ruok,mntr,cons,wchs",
	}
	if len(members) > 0 {
		cfg = append(cfg, "initLimit=10", "syncLimit=5")
		cfg = append(cfg, members...)
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.id)+"\n"), 0o644); err != nil {
			return fmt.Errorf("zkproc: %w", err)
		}
	}
	return os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(strings.Join(cfg, "\n")+"\n"), 0o644)
}

var errAddrInUse = errors.New("address already in use")

// launch runs the JVM; s.mu is held.
func (s *Server) launch() error {
	out, err := os.OpenFile(filepath.Join(s.dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("zkproc: %w", err)
	}
	args := append(append([]string{}, s.flags...),
		"-cp", Jar+":"+loggerJar,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(s.dir, "zoo.cfg"))
	cmd := exec.Command(s.java, args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	out.Close()
	if err != nil {
		return fmt.Errorf("zkproc: starting java: %w", err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	s.cmd, s.done, s.paused = cmd, done, false
	return nil
}

// start launches the server and waits for srvr to report a mode in want
// ("standalone", or "leader|follower" for an ensemble member).
func (s *Server) start(ctx context.Context, want string) error {
	s.mu.Lock()
	err := s.launch()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.waitServing(ctx, want)
}

// waitServing polls srvr until the mode matches one of want ("a|b").
func (s *Server) waitServing(ctx context.Context, want string) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	var last error
	for {
		select {
		case <-done:
			err := errors.New("zkproc: the server exited")
			tail := s.logTail()
			if strings.Contains(tail, "Address already in use") {
				err = fmt.Errorf("%w (%w)", err, errAddrInUse)
			}
			return fmt.Errorf("%w\nlog tail (%s):\n%s", err, s.dir, tail)
		default:
		}
		mode, err := s.Mode(ctx)
		if err == nil {
			for _, w := range strings.Split(want, "|") {
				if mode == w {
					return nil
				}
			}
			err = fmt.Errorf("mode %q", mode)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("zkproc: waiting for %s to serve: %w (last: %v)\nlog tail:\n%s", s.Addr(), ctx.Err(), last, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (s *Server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, logName))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// Addr returns the client address, 127.0.0.1:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// ID returns the server's myid in an ensemble (0 for a standalone server).
func (s *Server) ID() int { return s.id }

// Dir returns the server's directory (zoo.cfg, data, zookeeper.log).
func (s *Server) Dir() string { return s.dir }

// PID returns the process id, or 0 if the server is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return 0
	}
	return s.cmd.Process.Pid
}

// running reports whether the process is alive; s.mu is held.
func (s *Server) running() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (s *Server) Kill() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kill()
}

func (s *Server) kill() error {
	if !s.running() {
		return nil
	}
	err := s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.paused = false
	return err
}

// Stop sends SIGTERM, waits up to 10s, then SIGKILL.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return nil
	}
	if s.paused {
		s.cmd.Process.Signal(syscall.SIGCONT)
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		s.paused = false
		return nil
	case <-time.After(stopTimeout):
		return s.kill()
	}
}

// Pause sends SIGSTOP: the server stops answering but keeps its sockets.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP, true) }

// Resume sends SIGCONT to a paused server.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT, false) }

func (s *Server) signal(sig syscall.Signal, paused bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running() {
		return errors.New("zkproc: server not running")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		return err
	}
	s.paused = paused
	return nil
}

// Restart starts a stopped or killed server again on the same port and
// data, and waits until it serves (an ensemble member: as leader or
// follower, so a quorum must be up).
func (s *Server) Restart(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errors.New("zkproc: server closed")
	}
	if s.running() {
		s.mu.Unlock()
		return errors.New("zkproc: server still running")
	}
	err := s.launch()
	s.mu.Unlock()
	if err != nil {
		return err
	}
	want := "standalone"
	if s.id != 0 {
		want = "leader|follower"
	}
	return s.waitServing(ctx, want)
}

// Close stops the server and removes its directory. It is idempotent.
func (s *Server) Close() error {
	err := s.Stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	os.RemoveAll(s.dir)
	return err
}
