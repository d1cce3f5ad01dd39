// Package zkproc starts real ZooKeeper servers (Debian's zookeeper package,
// 3.8) on 127.0.0.1 for tests and tools: one standalone server, or an
// ensemble of several (with Options.PeerProxies, one whose links between
// servers can be cut: Isolate, Partition, Heal).
//
// Every server is a JVM with a small heap (-Xmx128m -Xms32m
// -XX:+UseSerialGC) run through internal/proc: in its own process group,
// signalled only by its own PID and reaped by a goroutine that ends when it
// exits. A server counts as started once the srvr four-letter command
// reports it serving (ruok answers too early). Close stops the process and
// removes its directory.
package zkproc

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
	// PeerProxies (StartEnsemble) routes the servers' quorum and election
	// traffic through proxies in front of those ports, so that Isolate,
	// Partition and Heal can cut and heal the links between servers;
	// clients still reach every server directly.
	PeerProxies bool
}

// process is embedded under a name of its own, so that its methods are
// the Server's but the field is not exported.
type process = proc.Process

// Server is one ZooKeeper process. Its methods are safe for concurrent use.
//
// From the embedded process it has Running, PID, Kill, Stop (SIGTERM, then
// SIGKILL after 10 s), Pause (SIGSTOP, returning once every thread of the
// JVM has stopped: it keeps its sockets but answers nothing), Resume,
// LogTail, and Restart(ctx), which kills the server if it runs, starts it
// again on the same ports and data and waits until it serves (an ensemble
// member: as leader or follower, so a quorum must be up); after Close it
// fails.
type Server struct {
	dir      string
	port     int
	id       int       // myid in an ensemble; 0 standalone
	peer     peerPorts // in an ensemble: the quorum and election ports it binds
	*process           // nil until launched
}

// Start starts a standalone server and returns once it serves.
func Start(ctx context.Context, o Options) (*Server, error) {
	java, err := lookJava()
	if err != nil {
		return nil, err
	}
	return proc.Retry(3, func() (*Server, error) {
		s, err := newServer(o, 0)
		if err != nil {
			return nil, err
		}
		if err = s.writeConfig(o, nil); err == nil {
			s.process, err = proc.Start(ctx, s.spec(java, o))
		}
		if err != nil {
			s.Close()
			return nil, err
		}
		return s, nil
	})
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

func newServer(o Options, id int) (*Server, error) {
	dir, err := os.MkdirTemp(o.Dir, "zookeeper-")
	if err != nil {
		return nil, fmt.Errorf("zkproc: %w", err)
	}
	port, err := freeport.Take(false)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("zkproc: %w", err)
	}
	return &Server{dir: dir, port: port, id: id}, nil
}

// spec returns how to run the server: a small JVM, ready once srvr reports
// it serving standalone (or, in an ensemble, as leader or follower).
func (s *Server) spec(java string, o Options) proc.Spec {
	args := []string{"-Xmx128m", "-Xms32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"}
	if !o.ForceSync {
		args = append(args, "-Dzookeeper.forceSync=no")
	}
	args = append(args, "-cp", Jar+":"+loggerJar,
		"org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(s.dir, "zoo.cfg"))
	want := []string{"standalone"}
	if s.id != 0 {
		want = []string{"leader", "follower"}
	}
	return proc.Spec{
		Name:   fmt.Sprintf("zookeeper %d on %s", s.id, s.Addr()),
		Path:   java,
		Args:   args,
		Dir:    s.dir,
		Output: filepath.Join(s.dir, logName),
		Ready: func(ctx context.Context, _ int) error {
			mode, err := s.Mode(ctx)
			if err == nil && !slices.Contains(want, mode) {
				err = fmt.Errorf("mode %q", mode)
			}
			return err
		},
		ReadyTimeout: readyTimeout,
		StopTimeout:  stopTimeout,
	}
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

// Addr returns the client address, 127.0.0.1:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// ID returns the server's myid in an ensemble (0 for a standalone server).
func (s *Server) ID() int { return s.id }

// Dir returns the server's directory (zoo.cfg, data, zookeeper.log).
func (s *Server) Dir() string { return s.dir }

// Close stops the server (SIGTERM, then SIGKILL after 10 s) and removes
// its directory. It is idempotent; a closed server cannot be restarted.
func (s *Server) Close() error {
	var err error
	if s.process != nil {
		err = errors.Join(s.Stop(), s.process.Close())
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}
