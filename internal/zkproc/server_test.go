package zkproc

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/proc"
)

func TestStandalone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	if m, err := s.Mode(ctx); err != nil || m != "standalone" {
		t.Fatalf("mode %q, %v", m, err)
	}
	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	// Every thread of the JVM has stopped by the time Pause returns.
	if stopped, err := proc.Stopped(pid); err != nil || !stopped {
		t.Fatalf("a paused JVM has threads that run: %v, %v", stopped, err)
	}
	short, c2 := context.WithTimeout(ctx, 500*time.Millisecond)
	if _, err := s.Mode(short); err == nil {
		t.Error("a paused server answered srvr")
	}
	c2()
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if s.PID() == pid {
		t.Error("restart kept the old pid")
	}
	dir, newPID := s.Dir(), s.PID()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(newPID, 0); err == nil {
		t.Errorf("pid %d still alive after Close", newPID)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir %s left behind: %v", dir, err)
	}
}

func TestEnsembleLeader(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := StartEnsemble(ctx, 3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	l, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Kill(); err != nil {
		t.Fatal(err)
	}
	l2, err := e.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l2 == l {
		t.Fatal("the killed server still leads")
	}
	if err := l.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if m, err := l.Mode(ctx); err != nil || m != "follower" {
		t.Errorf("restarted old leader: mode %q, %v; want follower", m, err)
	}
}
