package inventory

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dlockgo/dlock/fence"
)

// Store is where the stock and the orders live. The two implementations are
// this package's PostgresStore and SQLiteStore; both create their schema
// (embedded migrations) when opened:
//
//	stock  (sku PK, qty, version, fence, initial)  qty >= 0
//	orders (id, sku, qty, buyer, request_id UNIQUE, created_at)
//	idem   (biz_key PK, status 0 processing / 1 done / 2 failed, created_at)
//
// initial counts every unit ever put on sale, so Reconcile can tell an
// oversell from a restock. A Store is safe for concurrent use.
type Store interface {
	// Kind returns "postgres" or "sqlite".
	Kind() string
	// AddSKU puts qty units of a new sku on sale. It returns true if it
	// created the sku, false if the sku already existed with that initial
	// quantity, and ErrExists if it exists with another one.
	AddSKU(ctx context.Context, sku string, qty int64) (bool, error)
	// Stock reads a sku's row, or returns ErrUnknownSKU (ErrInvalidInput
	// for a malformed sku).
	Stock(ctx context.Context, sku string) (Stock, error)
	// Orders returns the number of orders of a sku and the units they took.
	Orders(ctx context.Context, sku string) (count, units int64, err error)
	// SKUs lists every sku, in order.
	SKUs(ctx context.Context) ([]string, error)
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Close closes the connections.
	Close() error

	db() sqlDB
}

// Stock is one stock row.
type Stock struct {
	SKU     string `json:"sku"`
	Qty     int64  `json:"qty"`
	Initial int64  `json:"initial"`
	Version int64  `json:"version"`
	Fence   int64  `json:"fence"`
}

// Open opens a Store from a DSN: postgres://… or postgresql://… for
// PostgreSQL; sqlite:PATH, file:PATH or a path ending in .db, .sqlite or
// .sqlite3 for SQLite.
func Open(ctx context.Context, dsn string) (Store, error) {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return OpenPostgres(ctx, dsn)
	case strings.HasPrefix(dsn, "sqlite:"):
		return OpenSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"))
	case strings.HasPrefix(dsn, "file:"), strings.HasSuffix(dsn, ".db"), strings.HasSuffix(dsn, ".sqlite"), strings.HasSuffix(dsn, ".sqlite3"):
		return OpenSQLite(ctx, dsn)
	}
	return nil, fmt.Errorf("%w: database %q: want postgres://… or sqlite:PATH", ErrInvalidInput, dsn)
}

// querier runs statements on a store or inside one of its transactions.
// Placeholders are $1..$n on both databases.
type querier interface {
	exec(ctx context.Context, q string, args ...any) (int64, error)
	queryRow(ctx context.Context, q string, args ...any) scanner
	fenced(ctx context.Context, u fence.Update, token int64, key any, args ...any) error
}

// scanner is a row; Scan returns errNoRows when there is none.
type scanner interface{ Scan(dest ...any) error }

var errNoRows = errors.New("inventory: no rows")

// sqlDB is a store's connection pool.
type sqlDB interface {
	querier
	// inTx runs fn in a transaction, committing if it returns nil and
	// rolling back otherwise (SQLite: BEGIN IMMEDIATE).
	inTx(ctx context.Context, fn func(q querier) error) error
	// eachRow runs a query and calls fn with every row, in order.
	eachRow(ctx context.Context, fn func(row scanner) error, q string, args ...any) error
	dialect() dialect
}

// dialect holds the few SQL snippets that differ.
type dialect struct {
	now string // the current time
	age string // seconds since created_at
	// forShare ends a SELECT that locks its rows against writers until the
	// transaction ends ("": the transaction itself excludes writers).
	forShare string
}

// Common statements, the same on both databases.
const (
	qStock       = `SELECT sku, qty, initial, version, fence FROM stock WHERE sku = $1`
	qOrders      = `SELECT COUNT(*), COALESCE(SUM(qty), 0) FROM orders WHERE sku = $1`
	qAddSKU      = `INSERT INTO stock (sku, qty, initial) VALUES ($1, $2, $2) ON CONFLICT (sku) DO NOTHING`
	qInsertOrder = `INSERT INTO orders (sku, qty, buyer, request_id) VALUES ($1, $2, $3, $4) ON CONFLICT (request_id) DO NOTHING RETURNING id`
	qOrderByReq  = `SELECT id, sku, qty, buyer FROM orders WHERE request_id = $1`
)

func addSKU(ctx context.Context, db sqlDB, sku string, qty int64) (bool, error) {
	if err := validSKU(sku); err != nil {
		return false, err
	}
	if qty < 0 {
		return false, fmt.Errorf("%w: qty %d", ErrInvalidInput, qty)
	}
	n, err := db.exec(ctx, qAddSKU, sku, qty)
	if err != nil {
		return false, fmt.Errorf("inventory: add sku %q: %w", sku, err)
	}
	if n == 1 {
		return true, nil
	}
	st, err := stock(ctx, db, sku)
	if err != nil {
		return false, err
	}
	if st.Initial != qty {
		return false, fmt.Errorf("%w: %q was put on sale with %d units", ErrExists, sku, st.Initial)
	}
	return false, nil
}

func stock(ctx context.Context, q querier, sku string) (Stock, error) {
	var s Stock
	if err := validSKU(sku); err != nil {
		return s, err
	}
	err := q.queryRow(ctx, qStock, sku).Scan(&s.SKU, &s.Qty, &s.Initial, &s.Version, &s.Fence)
	switch {
	case errors.Is(err, errNoRows):
		return s, fmt.Errorf("%w: %q", ErrUnknownSKU, sku)
	case err != nil:
		return s, fmt.Errorf("inventory: read stock %q: %w", sku, err)
	}
	return s, nil
}

func orders(ctx context.Context, q querier, sku string) (count, units int64, err error) {
	if err := q.queryRow(ctx, qOrders, sku).Scan(&count, &units); err != nil {
		return 0, 0, fmt.Errorf("inventory: count orders %q: %w", sku, err)
	}
	return count, units, nil
}

// order is one order row.
type order struct {
	id         int64
	sku, buyer string
	qty        int64
}

// insertOrder inserts an order; ok is false when the request id already
// has one (nothing inserted).
func insertOrder(ctx context.Context, q querier, sku string, qty int64, buyer, requestID string) (id int64, ok bool, err error) {
	err = q.queryRow(ctx, qInsertOrder, sku, qty, buyer, requestID).Scan(&id)
	switch {
	case errors.Is(err, errNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("inventory: insert order: %w", err)
	}
	return id, true, nil
}

// orderByRequest returns the order of a request id, if any.
func orderByRequest(ctx context.Context, q querier, requestID string) (order, bool, error) {
	var o order
	err := q.queryRow(ctx, qOrderByReq, requestID).Scan(&o.id, &o.sku, &o.qty, &o.buyer)
	switch {
	case errors.Is(err, errNoRows):
		return o, false, nil
	case err != nil:
		return o, false, fmt.Errorf("inventory: read order: %w", err)
	}
	return o, true, nil
}
