// Package pgxfence runs fence.Update with pgx (a *pgx.Conn, *pgxpool.Pool
// or pgx.Tx) instead of database/sql. It lives in its own package so that
// users of database/sql do not build pgx.
package pgxfence

import (
	"context"
	"errors"
	"slices"

	"github.com/dlockgo/dlock/fence"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Execer is *pgx.Conn, *pgxpool.Pool or pgx.Tx.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Exec is fence.Update.Exec for pgx: nil when the row was written, an
// error wrapping a *fence.StaleError (fence.ErrStale) when a higher token
// wrote it before, fence.ErrCondition when the token was current but Where
// failed, fence.ErrNoRow when no row has the key, or the database's error
// (each named by Update.Wrap).
func Exec(ctx context.Context, db Execer, u fence.Update, token int64, key any, args ...any) error {
	update, probe, err := u.Prepare(token, len(args))
	if err != nil {
		return err
	}
	tag, err := db.Exec(ctx, update, append(slices.Clip(args), token, key)...)
	if err != nil {
		return u.Wrap(err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	var seen int64
	err = db.QueryRow(ctx, probe, key).Scan(&seen)
	return u.Explain(token, seen, err, errors.Is(err, pgx.ErrNoRows))
}
