package drill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/dlockgo/dlock/fence"
)

// soakStore is the soak's storage, in SQLite, which no fault touches: per
// lock name a plain counter (read, then written back plus one, as separate
// statements: two holders at once lose an update) and a fenced register (a
// write is accepted iff its token is at least the highest accepted).
type soakStore struct {
	db    *sql.DB
	names []string
}

func openSoakStore(ctx context.Context, dir string, n int) (*soakStore, error) {
	db, err := sql.Open("sqlite", filepath.Join(dir, "soak.db")+"?_busy_timeout=10000&_journal_mode=WAL&_synchronous=OFF")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	s := &soakStore{db: db}
	if _, err := db.ExecContext(ctx, `CREATE TABLE reg (name TEXT PRIMARY KEY, n INTEGER NOT NULL DEFAULT 0, fence INTEGER NOT NULL DEFAULT 0)`); err != nil {
		db.Close()
		return nil, err
	}
	for i := range n {
		name := fmt.Sprintf("soak-%d", i)
		if _, err := db.ExecContext(ctx, `INSERT INTO reg (name) VALUES ($1)`, name); err != nil {
			db.Close()
			return nil, err
		}
		s.names = append(s.names, name)
	}
	return s, nil
}

func (s *soakStore) close() error { return s.db.Close() }

// plainIncrement reads name's counter, waits think, and writes it back plus
// one.
func (s *soakStore) plainIncrement(ctx context.Context, name string, think time.Duration) error {
	n, _, err := s.read(ctx, name)
	if err != nil {
		return err
	}
	if err := sleep(ctx, think); err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, `UPDATE reg SET n = $1 WHERE name = $2`, n+1, name)
	return err
}

var soakFenced = fence.Update{Table: "reg", Key: "name"}

// fencedWrite writes token to name's register through the fence:
// fence.ErrStale when a higher token was written first.
func (s *soakStore) fencedWrite(ctx context.Context, name string, token int64) error {
	return soakFenced.Exec(ctx, s.db, token, name)
}

func isStale(err error) bool { return errors.Is(err, fence.ErrStale) }

// read returns name's plain counter and the highest token its fenced
// register accepted.
func (s *soakStore) read(ctx context.Context, name string) (n, fence int64, err error) {
	err = s.db.QueryRowContext(ctx, `SELECT n, fence FROM reg WHERE name = $1`, name).Scan(&n, &fence)
	return n, fence, err
}
