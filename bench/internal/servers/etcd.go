package servers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/dlockgo/dlock/internal/freeport"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// etcdChildEnv, when set (to a data directory), turns this executable into
// the etcd child: see ServeEtcdChild.
const etcdChildEnv = "DLOCKBENCH_ETCD_CHILD"

// Etcd is a single-member etcd (go.etcd.io/etcd/server/v3/embed) running in a
// child process of this executable, so that its CPU time and allocations are
// not counted as the client's. It listens on 127.0.0.1 with its data in a
// temporary directory.
type Etcd struct {
	URL   string // client URL, http://127.0.0.1:PORT
	dir   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// ServeEtcdChild runs the etcd child if this process was started as one by
// StartEtcd, and reports whether it was; the caller must then exit. Call it
// first thing in main and in TestMain.
func ServeEtcdChild() bool {
	dir := os.Getenv(etcdChildEnv)
	if dir == "" {
		return false
	}
	if err := serveEtcd(dir); err != nil {
		fmt.Fprintln(os.Stderr, "etcd child:", err)
		os.Exit(1)
	}
	return true
}

// serveEtcd starts etcd in dir, prints "ready URL" on stdout and stops etcd
// when stdin is closed (the parent called Close or died).
func serveEtcd(dir string) error {
	cport, err := freeport.Take(false)
	if err != nil {
		return err
	}
	pport, err := freeport.Take(false)
	if err != nil {
		return err
	}
	cu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(cport))
	pu, _ := url.Parse("http://127.0.0.1:" + strconv.Itoa(pport))
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "data")
	cfg.LogLevel = "error"
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return err
	case <-time.After(30 * time.Second):
		return errors.New("etcd not ready after 30s")
	}
	fmt.Printf("ready %s\n", cu)
	gone := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(gone) }()
	select {
	case <-gone:
		return nil
	case err := <-e.Err():
		return err
	}
}

// StartEtcd starts the etcd child and returns once it serves clients.
func StartEtcd(ctx context.Context) (*Etcd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("servers: etcd: %w", err)
	}
	dir, err := os.MkdirTemp("", "dlockbench-etcd-")
	if err != nil {
		return nil, fmt.Errorf("servers: etcd: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("servers: etcd: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), etcdChildEnv+"="+dir)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("servers: etcd: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("servers: etcd: %w", err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("servers: starting etcd child: %w", err)
	}
	e := &Etcd{dir: dir, cmd: cmd, stdin: stdin, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, stdout)
		cmd.Wait()
		close(e.done)
	}()
	ctx, cancel := context.WithTimeout(ctx, 40*time.Second)
	defer cancel()
	select {
	case line := <-ready:
		if u, ok := strings.CutPrefix(strings.TrimSpace(line), "ready "); ok {
			e.URL = u
			return e, nil
		}
		err = errors.New("etcd child exited before it was ready")
	case <-ctx.Done():
		err = ctx.Err()
	}
	e.Close()
	data, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
	return nil, fmt.Errorf("servers: etcd: %w\n%s", err, tail(string(data), 10))
}

// PID returns the child's process id.
func (e *Etcd) PID() int { return e.cmd.Process.Pid }

// Close stops etcd (closing the child's stdin; SIGKILL after 10 s), waits
// until the child is reaped and removes the data directory.
func (e *Etcd) Close() error {
	e.stdin.Close()
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		e.cmd.Process.Kill()
		<-e.done
	}
	return os.RemoveAll(e.dir)
}
