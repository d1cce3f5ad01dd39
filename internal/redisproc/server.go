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
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/internal/freeport"
	"github.com/dlockgo/dlock/internal/proc"
)

// ErrNoRedisServer is returned (wrapped) when redis-server is not on PATH.
var ErrNoRedisServer = errors.New("redisproc: redis-server not found on PATH; " +
	"install it with: apt-get install redis-server " +
	"(Sentinel runs the same binary with --sentinel; Debian also packages it as redis-sentinel)")

const (
	// readyTimeout caps how long a start waits for the server to answer.
	readyTimeout = 10 * time.Second
	// startAttempts is how often a start on a free port is tried when the
	// port was taken by someone else in the meantime.
	startAttempts = 5
	logName       = "redis.log"
	stdoutName    = "stdout.log"
)

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

// process is embedded under a name of its own, so that its methods are
// the Server's but the field is not exported.
type process = proc.Process

// Server is one redis-server process (standalone, replica, cluster node or
// Sentinel). Its methods are safe for concurrent use.
//
// From the embedded process it has Running, PID, Kill, Stop (SIGTERM, then
// SIGKILL after 5 s), Pause (SIGSTOP, returning once every thread has
// stopped: it keeps its port and accepts connections but answers nothing),
// Resume, Await and LogTail.
type Server struct {
	dir  string
	port int
	*process
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
	attempts := startAttempts
	if port != 0 {
		attempts = 1
	}
	s, err := proc.Retry(attempts, func() (*Server, error) {
		s := &Server{dir: dir, port: port}
		if s.port == 0 {
			p, err := freeport.Take(bus)
			if err != nil {
				return nil, fmt.Errorf("redisproc: %w", err)
			}
			s.port = p
		}
		args, err := argv(dir, s.port)
		if err != nil {
			return nil, err
		}
		s.process, err = proc.Start(ctx, proc.Spec{
			Name:   "redis-server on " + s.Addr(),
			Path:   bin,
			Args:   args,
			Dir:    dir,
			Output: filepath.Join(dir, stdoutName),
			Logs:   []string{filepath.Join(dir, logName)},
			// INFO rather than PING: it also proves the answer comes from
			// our process and not from some other server that got the port.
			Ready: func(ctx context.Context, pid int) error {
				info, err := command(ctx, s.Addr(), "INFO", "server")
				if err == nil && !strings.Contains(info, fmt.Sprintf("process_id:%d\r\n", pid)) {
					err = errors.New("another process answers on this port")
				}
				return err
			},
			ReadyTimeout: readyTimeout,
		})
		return s, err
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the port the server listens on; it never changes.
func (s *Server) Port() int { return s.port }

// Dir returns the server's temporary working directory, which holds its log
// (redis.log), its stdout/stderr (stdout.log) and any config files.
func (s *Server) Dir() string { return s.dir }

// Restart kills the process if it is running and starts it again on the same
// port with the same arguments and directory, returning once it answers
// (within 10 seconds). Without persistence a restarted standalone server is
// empty; a Sentinel keeps the state it wrote to its config file, and a
// cluster node its nodes.conf.
func (s *Server) Restart() error { return s.process.Restart(context.Background()) }

// Close kills the process, waits for it to be reaped and removes its
// directory. It is idempotent; a closed server cannot be restarted.
func (s *Server) Close() error {
	return errors.Join(s.process.Close(), os.RemoveAll(s.dir))
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
