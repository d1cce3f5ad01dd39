package inventory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/dlockgo/dlock/fence"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// SQLiteStore is a Store on SQLite (modernc.org/sqlite, pure Go) in WAL
// mode with a busy timeout, every transaction BEGIN IMMEDIATE (a writer
// takes the write lock up front, so two read-then-write transactions never
// deadlock on the upgrade). One process uses one connection: SQLite has one
// writer at a time anyway, and queueing in Go is cheaper than spinning in
// the busy handler; several processes on one file wait for each other
// through the busy timeout.
type SQLiteStore struct {
	handle *sql.DB
}

// SQLiteParams are the connection parameters OpenSQLite adds to the path.
const SQLiteParams = "_busy_timeout=10000&_journal_mode=WAL&_synchronous=NORMAL&_txlock=immediate"

// OpenSQLite opens (creating it if needed) the database file at path and
// applies the migrations.
func OpenSQLite(ctx context.Context, path string) (*SQLiteStore, error) {
	if path == "" || strings.Contains(path, "?") {
		return nil, fmt.Errorf("%w: sqlite path %q (a plain file path, no parameters)", ErrInvalidInput, path)
	}
	db, err := sql.Open("sqlite", path+"?"+SQLiteParams)
	if err != nil {
		return nil, fmt.Errorf("inventory: sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("inventory: sqlite %s: %w", path, err)
	}
	s := &SQLiteStore{handle: db}
	if err := migrate(ctx, s.db(), "sqlite", ""); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Kind returns "sqlite".
func (s *SQLiteStore) Kind() string { return "sqlite" }

// DB returns the database/sql handle.
func (s *SQLiteStore) DB() *sql.DB { return s.handle }

// AddSKU: see Store.
func (s *SQLiteStore) AddSKU(ctx context.Context, sku string, qty int64) (bool, error) {
	return addSKU(ctx, s.db(), sku, qty)
}

// Stock: see Store.
func (s *SQLiteStore) Stock(ctx context.Context, sku string) (Stock, error) {
	return stock(ctx, s.db(), sku)
}

// Orders: see Store.
func (s *SQLiteStore) Orders(ctx context.Context, sku string) (int64, int64, error) {
	return orders(ctx, s.db(), sku)
}

// SKUs: see Store.
func (s *SQLiteStore) SKUs(ctx context.Context) ([]string, error) {
	rows, err := s.handle.QueryContext(ctx, `SELECT sku FROM stock ORDER BY sku`)
	if err != nil {
		return nil, fmt.Errorf("inventory: list skus: %w", err)
	}
	defer rows.Close()
	var skus []string
	for rows.Next() {
		var sku string
		if err := rows.Scan(&sku); err != nil {
			return nil, fmt.Errorf("inventory: list skus: %w", err)
		}
		skus = append(skus, sku)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("inventory: list skus: %w", err)
	}
	return skus, nil
}

// Ping checks that the database answers.
func (s *SQLiteStore) Ping(ctx context.Context) error { return s.handle.PingContext(ctx) }

// Close closes the database.
func (s *SQLiteStore) Close() error { return s.handle.Close() }

func (s *SQLiteStore) db() sqlDB { return liteDB{s.handle} }

// sqlQuerier is what *sql.DB and *sql.Tx share.
type sqlQuerier interface {
	fence.SQLExecer
}

type liteQ struct{ q sqlQuerier }

func (l liteQ) exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := l.q.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (l liteQ) queryRow(ctx context.Context, q string, args ...any) scanner {
	return liteRow{l.q.QueryRowContext(ctx, q, args...)}
}

func (l liteQ) fenced(ctx context.Context, u fence.Update, token int64, key any, args ...any) error {
	return u.Exec(ctx, l.q, token, key, args...)
}

type liteRow struct{ r *sql.Row }

func (r liteRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return errNoRows
	}
	return err
}

// liteDB is the database as a sqlDB.
type liteDB struct{ db *sql.DB }

func (d liteDB) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return liteQ{d.db}.exec(ctx, q, args...)
}

func (d liteDB) queryRow(ctx context.Context, q string, args ...any) scanner {
	return liteQ{d.db}.queryRow(ctx, q, args...)
}

func (d liteDB) fenced(ctx context.Context, u fence.Update, token int64, key any, args ...any) error {
	return liteQ{d.db}.fenced(ctx, u, token, key, args...)
}

func (d liteDB) inTx(ctx context.Context, fn func(q querier) error) error {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(liteQ{tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (d liteDB) eachRow(ctx context.Context, fn func(row scanner) error, q string, args ...any) error {
	rows, err := d.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (d liteDB) dialect() dialect {
	return dialect{now: "CURRENT_TIMESTAMP", age: "((julianday('now') - julianday(created_at)) * 86400.0)"}
}
