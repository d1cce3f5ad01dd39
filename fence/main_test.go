package fence_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/fence/pgxfence"
	"github.com/dlockgo/dlock/internal/pgtest"
	"github.com/dlockgo/dlock/internal/pgtest/pgproc"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// pg is one PostgreSQL server shared by the package's tests; each test gets
// its own database.
var pg *pgproc.Server

func TestMain(m *testing.M) {
	os.Exit(pgtest.Run(m, func(s *pgproc.Server) { pg = s }))
}

// pgDSN creates a fresh database and drops it at cleanup.
func pgDSN(t *testing.T) string { return pgtest.DB(t, pg) }

// store is one way of talking to one database.
type store struct {
	name  string
	exec  func(ctx context.Context, u fence.Update, token int64, key any, args ...any) error
	run   func(ctx context.Context, q string, args ...any) error
	query func(ctx context.Context, q string, args ...any) rowScanner
}

type rowScanner interface{ Scan(dest ...any) error }

// stores returns PostgreSQL through pgx, PostgreSQL through database/sql
// and SQLite through database/sql, each on a fresh database.
func stores(t *testing.T) []store {
	t.Helper()
	ctx := context.Background()

	pool, err := pgxpool.New(ctx, pgDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	pgxs := store{
		name: "postgres-pgx",
		exec: func(ctx context.Context, u fence.Update, token int64, key any, args ...any) error {
			return pgxfence.Exec(ctx, pool, u, token, key, args...)
		},
		run: func(ctx context.Context, q string, args ...any) error {
			_, err := pool.Exec(ctx, q, args...)
			return err
		},
		query: func(ctx context.Context, q string, args ...any) rowScanner { return pool.QueryRow(ctx, q, args...) },
	}

	pgsql, err := sql.Open("pgx", pgDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pgsql.Close() })

	lite, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "fence.db")+"?_busy_timeout=10000&_journal_mode=WAL&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	return []store{pgxs, sqlStore("postgres-database/sql", pgsql), sqlStore("sqlite", lite)}
}

func sqlStore(name string, db *sql.DB) store {
	return store{
		name: name,
		exec: func(ctx context.Context, u fence.Update, token int64, key any, args ...any) error {
			return u.Exec(ctx, db, token, key, args...)
		},
		run: func(ctx context.Context, q string, args ...any) error {
			_, err := db.ExecContext(ctx, q, args...)
			return err
		},
		query: func(ctx context.Context, q string, args ...any) rowScanner {
			return db.QueryRowContext(ctx, q, args...)
		},
	}
}
