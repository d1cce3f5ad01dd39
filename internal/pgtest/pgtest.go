// Package pgtest starts throwaway PostgreSQL servers for tests through
// package pgproc. Helpers register cleanup with t.Cleanup and fail the test
// (with the install hint when PostgreSQL is missing); none of them skips.
package pgtest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/pgproc"
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
