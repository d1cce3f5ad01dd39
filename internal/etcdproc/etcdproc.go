// Package etcdproc starts real etcd processes on 127.0.0.1 for tests and
// tools: one member, or a cluster of several, each on free ports, with the
// faults a test needs (SIGKILL, SIGSTOP/SIGCONT, restart, a client-side
// proxy that can be cut, and with Options.PeerProxies links between
// members that can be cut: Isolate, Partition, Heal).
//
// Every process runs through internal/proc: in its own process group,
// signalled only by its own PID and reaped by a goroutine that ends when it
// exits. Close stops it, waits for it and removes its data directory:
// nothing is left running.
//
// The etcd binary is found by Binary: $DLOCK_ETCD, then etcd on PATH, then
// the cache location where the repository's build of the pinned server
// version goes (CacheBinary). Without one, Start fails with ErrNoEtcd, whose
// text says how to install it.
package etcdproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Version is the etcd server version the repository builds (see
// internal/etcdserver) and CacheBinary names.
const Version = "v3.7.3"

// EnvBinary names the environment variable that, when set, is the etcd
// binary to run.
const EnvBinary = "DLOCK_ETCD"

// ErrNoEtcd is returned (wrapped) when no etcd binary is found.
var ErrNoEtcd = errors.New("etcdproc: no etcd binary: set " + EnvBinary + " to one, put etcd on PATH, " +
	"or build the pinned server with: (cd internal/etcdserver && GOWORK=off go build -o \"${XDG_CACHE_HOME:-$HOME/.cache}/dlock/etcd-" +
	Version + "/etcd\" .) — Debian's etcd-server package (3.4) also works: apt-get install etcd-server")

// CacheBinary returns where the repository's build of etcd Version goes:
// <user cache dir>/dlock/etcd-<Version>/etcd.
func CacheBinary() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("etcdproc: %w", err)
	}
	return filepath.Join(dir, "dlock", "etcd-"+Version, "etcd"), nil
}

// Binary returns the etcd binary to run: $DLOCK_ETCD if set (it must be
// executable), else etcd on PATH, else CacheBinary if it exists. It returns
// an error wrapping ErrNoEtcd when there is none.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%w (%s=%s: %v)", ErrNoEtcd, EnvBinary, p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	p, err := CacheBinary()
	if err != nil {
		return "", fmt.Errorf("%w (%v)", ErrNoEtcd, err)
	}
	if err := executable(p); err != nil {
		return "", fmt.Errorf("%w (not on PATH; %v)", ErrNoEtcd, err)
	}
	return p, nil
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
