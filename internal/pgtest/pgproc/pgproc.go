// Package pgproc starts throwaway PostgreSQL servers on 127.0.0.1 for tests
// and tools: initdb into a fresh temporary directory, postgres on a free
// loopback port with Unix sockets off, trust authentication for the
// superuser "postgres".
//
// PostgreSQL refuses to run as root. When the caller is root, initdb and
// postgres run as the unprivileged "postgres" system user (or "nobody" when
// there is none), and the temporary directory is handed to that user; the
// directory is therefore created under Options.Dir or the system temporary
// directory, which that user must be able to traverse (a t.TempDir() is not:
// it is private to root).
//
// The server runs in its own process group, is signalled only by its own
// PID, and is reaped by a goroutine that ends with it. Close stops it, waits
// for it and removes the directory.
package pgproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlockgo/dlock/internal/freeport"
	"github.com/dlockgo/dlock/internal/proc"
	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres is returned (wrapped) when initdb or postgres is missing.
var ErrNoPostgres = errors.New("pgproc: initdb/postgres not found on PATH nor in /usr/lib/postgresql/*/bin; " +
	"install them with: apt-get install postgresql")

const (
	readyTimeout  = 30 * time.Second
	stopTimeout   = 10 * time.Second
	startAttempts = 5
	logName       = "postgres.log"
)

// DefaultSettings are the server settings Start uses unless Options.Settings
// overrides them: commits are not waited for on disk (synchronous_commit=off,
// the closest match to SQLite's WAL with synchronous=NORMAL), fsync stays on,
// and the footprint stays small so that several test packages can each run
// a server at once.
var DefaultSettings = []string{
	"synchronous_commit=off",
	"max_connections=200",
	"shared_buffers=32MB",
	"max_parallel_workers_per_gather=0", // no dynamic shared memory: containers often have a tiny /dev/shm
}

// Options configures Start.
type Options struct {
	// Dir is the parent of the server's temporary directory; "" means the
	// system temporary directory. When running as root it must be
	// traversable by the postgres system user.
	Dir string
	// Settings are extra "name=value" server settings (postgres -c), applied
	// after DefaultSettings.
	Settings []string
}

// process is embedded under a name of its own, so that its methods are
// the Server's but the field is not exported.
type process = proc.Process

// Server is one running PostgreSQL server. Its methods are safe for
// concurrent use.
//
// From the embedded process it has Running, PID, Kill, Stop (fast
// shutdown: SIGINT, then SIGQUIT, then SIGKILL, 10 s apart), Pause
// (SIGSTOP of the postmaster, returning once its threads have stopped),
// Resume, LogTail and Restart(ctx).
type Server struct {
	dir  string
	data string
	port int
	*process
}

// Start runs initdb and starts postgres on a free loopback port, returning
// once it accepts connections (bounded by ctx and 30 s). On failure the
// error carries the tail of the server log.
func Start(ctx context.Context, o Options) (*Server, error) {
	initdb, postgres, err := binaries()
	if err != nil {
		return nil, err
	}
	cred, uid, gid, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(o.Dir, "pg-")
	if err != nil {
		return nil, fmt.Errorf("pgproc: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgproc: %w", err)
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.CommandContext(ctx, initdb, "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Env = env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgproc: initdb: %w\n%s", err, tail(string(out)))
	}
	settings := slices.Concat(DefaultSettings, o.Settings)
	s, err := proc.Retry(startAttempts, func() (*Server, error) {
		port, err := freeport.Take(false)
		if err != nil {
			return nil, fmt.Errorf("pgproc: %w", err)
		}
		s := &Server{dir: dir, data: data, port: port}
		args := []string{"-D", data, "-p", strconv.Itoa(s.port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="}
		for _, kv := range settings {
			args = append(args, "-c", kv)
		}
		s.process, err = proc.Start(ctx, proc.Spec{
			Name:         "postgres on " + s.Addr(),
			Path:         postgres,
			Args:         args,
			Env:          env(),
			Dir:          dir,
			Output:       filepath.Join(dir, logName),
			Credential:   cred,
			Ready:        func(ctx context.Context, _ int) error { return s.ping(ctx) },
			ReadyTimeout: readyTimeout,
			StopSignals:  []syscall.Signal{syscall.SIGINT, syscall.SIGQUIT}, // fast, then immediate shutdown
			StopTimeout:  stopTimeout,
		})
		return s, err
	})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// ping returns nil once our own server (same data directory) answers.
func (s *Server) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var dataDir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dataDir); err != nil {
		return err
	}
	if filepath.Clean(dataDir) != filepath.Clean(s.data) {
		return fmt.Errorf("another server (%s) answers on %s", dataDir, s.Addr())
	}
	return nil
}

// Addr returns "127.0.0.1:PORT".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Port returns the server's port.
func (s *Server) Port() int { return s.port }

// Dir returns the server's temporary directory (data/ and postgres.log).
func (s *Server) Dir() string { return s.dir }

// DSN returns a connection URL for database db as the superuser.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", s.Addr(), db)
}

var dbName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// CreateDatabase creates database name (lower-case letters, digits and
// underscores) and returns its DSN.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	return s.admin(ctx, name, "CREATE DATABASE "+name)
}

// DropDatabase drops database name, disconnecting its sessions.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	_, err := s.admin(ctx, name, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}

func (s *Server) admin(ctx context.Context, name, stmt string) (string, error) {
	if !dbName.MatchString(name) {
		return "", fmt.Errorf("pgproc: invalid database name %q", name)
	}
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgproc: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return "", fmt.Errorf("pgproc: %s: %w", stmt, err)
	}
	return s.DSN(name), nil
}

// Close stops the server and removes its directory. It is idempotent.
func (s *Server) Close() error {
	return errors.Join(s.Stop(), s.process.Close(), os.RemoveAll(s.dir))
}

func tail(text string) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// env is the environment of initdb and postgres: a plain C locale.
func env() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "LANG=C", "LC_ALL=C", "TZ=UTC"}
}

// binaries finds initdb and postgres on PATH, else in the newest
// /usr/lib/postgresql/*/bin.
func binaries() (initdb, postgres string, err error) {
	initdb, err1 := exec.LookPath("initdb")
	postgres, err2 := exec.LookPath("postgres")
	if err1 == nil && err2 == nil {
		return initdb, postgres, nil
	}
	return versioned("/usr/lib/postgresql")
}

// versioned finds initdb and postgres in the newest root/*/bin.
func versioned(root string) (initdb, postgres string, err error) {
	dirs, _ := filepath.Glob(filepath.Join(root, "*", "bin"))
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		i, p := filepath.Join(d, "initdb"), filepath.Join(d, "postgres")
		if isExec(i) && isExec(p) {
			return i, p, nil
		}
	}
	return "", "", ErrNoPostgres
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// credential returns the credential to run PostgreSQL with: nil when not
// root, else the postgres (or nobody) system user.
func credential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, 0, 0, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 != nil || err2 != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, uid, gid, nil
	}
	return nil, 0, 0, errors.New("pgproc: running as root and there is no postgres or nobody user to run PostgreSQL as " +
		"(PostgreSQL refuses to run as root); apt-get install postgresql creates the postgres user")
}
