package fence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/fence/pgxfence"
)

// fencedDeduct is the fenced deduction of docs/INVENTORY.md, with
// database/sql, or with pgx when pgxTx is not nil; token is the
// lease's Lease.Token().
func fencedDeduct(ctx context.Context, tx *sql.Tx, pgxTx pgx.Tx, token int64, sku string, n int) error {
	deduct := fence.Update{Table: "stock", Key: "sku", Set: "qty = qty - $1", Where: "qty >= $1"}
	var err error
	if pgxTx == nil {
		err = deduct.Exec(ctx, tx, token, sku, n) // database/sql: *sql.DB, *sql.Tx, *sql.Conn
	} else {
		err = pgxfence.Exec(ctx, pgxTx, deduct, token, sku, n) // pgx: *pgx.Conn, *pgxpool.Pool, pgx.Tx
	}
	switch {
	case err == nil: // written
	case errors.Is(err, fence.ErrStale): // a newer holder wrote: you lost the lock; roll back
	case errors.Is(err, fence.ErrCondition): // token current, business condition false (sold out)
	case errors.Is(err, fence.ErrNoRow): // no such row
	}
	return err
}

// A stock row keeps the last token that wrote it. A holder whose lock
// expired (token 33) is rejected once the next holder (token 34) wrote,
// and a sold-out condition is told apart from a stale token.
func ExampleUpdate() {
	dir, _ := os.MkdirTemp("", "fence-example-")
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", filepath.Join(dir, "shop.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	ctx := context.Background()
	db.ExecContext(ctx, `CREATE TABLE stock (sku TEXT PRIMARY KEY, qty INTEGER NOT NULL, fence INTEGER NOT NULL DEFAULT 0)`)
	db.ExecContext(ctx, `INSERT INTO stock (sku, qty) VALUES ('1001', 1)`)

	deduct := fence.Update{Table: "stock", Key: "sku", Set: "qty = qty - $1", Where: "qty >= $1"}
	fmt.Println("token 34:", deduct.Exec(ctx, db, 34, "1001", 1))
	err = deduct.Exec(ctx, db, 33, "1001", 1)
	fmt.Println("token 33:", err, errors.Is(err, fence.ErrStale))
	err = deduct.Exec(ctx, db, 35, "1001", 1)
	fmt.Println("token 35:", errors.Is(err, fence.ErrCondition))
	// Output:
	// token 34: <nil>
	// token 33: dlock: fence update "stock": stale token 33 (already saw 34) true
	// token 35: true
}
