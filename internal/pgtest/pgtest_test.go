package pgtest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/pgtest"
	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartCreateQueryClose(t *testing.T) {
	var dir string
	t.Run("server", func(t *testing.T) {
		s := pgtest.Start(t)
		dir = s.Dir()
		dsn := pgtest.DB(t, s)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		var db, addr string
		if err := conn.QueryRow(ctx, "SELECT current_database(), inet_server_addr()::text").Scan(&db, &addr); err != nil {
			t.Fatal(err)
		}
		if db == "postgres" || addr != "127.0.0.1/32" {
			t.Fatalf("database %q on %q, want a fresh database on 127.0.0.1", db, addr)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE x(id int)"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "data", "PG_VERSION")); err != nil {
			t.Fatalf("data directory: %v", err)
		}
	})
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("directory %s left behind after Close (stat: %v)", dir, err)
	}
}
