package drill

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/dlockgo/dlock/fence"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"
)

// ledger is the failover drill's storage: a stock row per sku and one sales
// row per unit sold, in SQLite. Its plain write is the articles'
// read-check-write under a lock (000 §3.3 A, as separate statements, so two
// holders at once lose an update); its fenced write carries the lease's
// token (package fence) and the business condition.
type ledger struct {
	db      *sql.DB
	initial int64
	skus    []string
}

func openLedger(ctx context.Context, dir string, skus []string, stock int64) (*ledger, error) {
	db, err := sql.Open("sqlite", filepath.Join(dir, "ledger.db")+"?_busy_timeout=10000&_journal_mode=WAL")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	l := &ledger{db: db, initial: stock, skus: skus}
	stmts := []string{
		`CREATE TABLE stock (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL, fence INTEGER NOT NULL DEFAULT 0)`,
		`CREATE TABLE sales (id INTEGER PRIMARY KEY, sku TEXT NOT NULL, token INTEGER NOT NULL)`,
	}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			db.Close()
			return nil, err
		}
	}
	for _, sku := range skus {
		if _, err := db.ExecContext(ctx, `INSERT INTO stock (sku, qty) VALUES ($1, $2)`, sku, stock); err != nil {
			db.Close()
			return nil, err
		}
	}
	return l, nil
}

func (l *ledger) close() error { return l.db.Close() }

// read returns a sku's stock.
func (l *ledger) read(ctx context.Context, sku string) (int64, error) {
	var q int64
	err := l.db.QueryRowContext(ctx, `SELECT qty FROM stock WHERE sku = $1`, sku).Scan(&q)
	return q, err
}

// sellPlain writes the stock computed from what was read, and the sale.
func (l *ledger) sellPlain(ctx context.Context, sku string, read int64, token int64) error {
	if _, err := l.db.ExecContext(ctx, `UPDATE stock SET qty = $1 WHERE sku = $2`, read-1, sku); err != nil {
		return err
	}
	_, err := l.db.ExecContext(ctx, `INSERT INTO sales (sku, token) VALUES ($1, $2)`, sku, token)
	return err
}

var fencedSale = fence.Update{Table: "stock", Key: "sku", Set: "qty = qty - 1", Where: "qty >= 1"}

// sellFenced decrements through the fence; fence.ErrStale when a newer
// holder wrote first.
func (l *ledger) sellFenced(ctx context.Context, sku string, token int64) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fencedSale.Exec(ctx, tx, token, sku); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO sales (sku, token) VALUES ($1, $2)`, sku, token); err != nil {
		return err
	}
	return tx.Commit()
}

// oversold returns the units sold beyond what left the stock, over all skus.
func (l *ledger) oversold(ctx context.Context) (int64, error) {
	var sold, left int64
	if err := l.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM sales`).Scan(&sold); err != nil {
		return 0, err
	}
	if err := l.db.QueryRowContext(ctx, `SELECT COALESCE(SUM(qty), 0) FROM stock`).Scan(&left); err != nil {
		return 0, err
	}
	removed := l.initial*int64(len(l.skus)) - left
	if sold < removed {
		return 0, fmt.Errorf("ledger: %d units left the stock but only %d sales", removed, sold)
	}
	return sold - removed, nil
}

var errSoldOut = errors.New("sold out")
