// Package pgtest starts throwaway PostgreSQL servers for tests through
// package pgproc. Helpers register cleanup with t.Cleanup and fail the test
// (with the install hint when PostgreSQL is missing); none of them skips.
package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/pgtest/pgproc"
	"go.uber.org/goleak"
)

// startTimeout bounds a start, initdb included.
const startTimeout = 60 * time.Second

// Start starts a PostgreSQL server and closes it at cleanup.
func Start(t testing.TB, settings ...string) *pgproc.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	s, err := pgproc.Start(ctx, pgproc.Options{Settings: settings})
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("pgtest: closing postgres %s: %v", s.Addr(), err)
		}
	})
	return s
}

var dbSeq atomic.Int64

// DB creates a fresh database on s, returns its DSN and drops it at cleanup
// (register it before anything that connects to it, so those close first).
func DB(t testing.TB, s *pgproc.Server) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	name := fmt.Sprintf("t%d", dbSeq.Add(1))
	dsn, err := s.CreateDatabase(ctx, name)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		if err := s.DropDatabase(ctx, name); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return dsn
}

// Run starts one PostgreSQL server shared by a package's tests, hands it to
// use, runs the tests (take a fresh database per test with DB), closes the
// server, checks for leaked goroutines, and returns the exit code for
// os.Exit. Call it from TestMain.
func Run(m *testing.M, use func(*pgproc.Server)) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*startTimeout)
	s, err := pgproc.Start(ctx, pgproc.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	use(s)
	code := m.Run()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	return code
}
