package inventory

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/fence/pgxfence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultPostgresConns is the pool size when the DSN sets no pool_max_conns.
const DefaultPostgresConns = 16

// PostgresStore is a Store on PostgreSQL through a pgx v5 pool.
type PostgresStore struct {
	pool *pgxpool.Pool
}

// OpenPostgres connects to dsn (postgres://…; pool_max_conns in the DSN
// sets the pool size, default 16) and applies the migrations.
func OpenPostgres(ctx context.Context, dsn string) (*PostgresStore, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres dsn: %v", ErrInvalidInput, err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = DefaultPostgresConns
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("inventory: postgres: %w", err)
	}
	s := &PostgresStore{pool: pool}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("inventory: postgres: %w", err)
	}
	if err := migrate(ctx, pgDB{pool}, "postgres", "SELECT pg_advisory_xact_lock(7413)"); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// Kind returns "postgres".
func (s *PostgresStore) Kind() string { return "postgres" }

// Pool returns the pgx pool.
func (s *PostgresStore) Pool() *pgxpool.Pool { return s.pool }

// AddSKU: see Store.
func (s *PostgresStore) AddSKU(ctx context.Context, sku string, qty int64) (bool, error) {
	return addSKU(ctx, s.db(), sku, qty)
}

// Stock: see Store.
func (s *PostgresStore) Stock(ctx context.Context, sku string) (Stock, error) {
	return stock(ctx, s.db(), sku)
}

// Orders: see Store.
func (s *PostgresStore) Orders(ctx context.Context, sku string) (int64, int64, error) {
	return orders(ctx, s.db(), sku)
}

// SKUs: see Store.
func (s *PostgresStore) SKUs(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT sku FROM stock ORDER BY sku`)
	if err != nil {
		return nil, fmt.Errorf("inventory: list skus: %w", err)
	}
	skus, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("inventory: list skus: %w", err)
	}
	return skus, nil
}

// Ping checks that the database answers.
func (s *PostgresStore) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

// Close closes the pool.
func (s *PostgresStore) Close() error {
	s.pool.Close()
	return nil
}

func (s *PostgresStore) db() sqlDB { return pgDB{s.pool} }

// pgQuerier is what pgxpool.Pool and pgx.Tx share.
type pgQuerier interface {
	pgxfence.Execer
}

// pgQ runs statements through pgx.
type pgQ struct{ q pgQuerier }

func (p pgQ) exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := p.q.Exec(ctx, q, args...)
	return tag.RowsAffected(), err
}

func (p pgQ) queryRow(ctx context.Context, q string, args ...any) scanner {
	return pgRow{p.q.QueryRow(ctx, q, args...)}
}

func (p pgQ) fenced(ctx context.Context, u fence.Update, token int64, key any, args ...any) error {
	return pgxfence.Exec(ctx, p.q, u, token, key, args...)
}

type pgRow struct{ r pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return errNoRows
	}
	return err
}

// pgDB is the pool as a sqlDB.
type pgDB struct{ pool *pgxpool.Pool }

func (d pgDB) exec(ctx context.Context, q string, args ...any) (int64, error) {
	return pgQ{d.pool}.exec(ctx, q, args...)
}

func (d pgDB) queryRow(ctx context.Context, q string, args ...any) scanner {
	return pgQ{d.pool}.queryRow(ctx, q, args...)
}

func (d pgDB) fenced(ctx context.Context, u fence.Update, token int64, key any, args ...any) error {
	return pgQ{d.pool}.fenced(ctx, u, token, key, args...)
}

func (d pgDB) inTx(ctx context.Context, fn func(q querier) error) error {
	return pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return fn(pgQ{tx}) })
}

func (d pgDB) eachRow(ctx context.Context, fn func(row scanner) error, q string, args ...any) error {
	rows, err := d.pool.Query(ctx, q, args...)
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

func (d pgDB) dialect() dialect {
	return dialect{now: "now()", age: "EXTRACT(EPOCH FROM (now() - created_at))", forShare: " FOR SHARE"}
}
