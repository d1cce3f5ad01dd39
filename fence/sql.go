package fence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
)

// Update is a fenced conditional UPDATE of one row, identified by Key = key.
// Set and Where are SQL fragments written by the programmer (never from
// untrusted input) with placeholders $1..$n for the business arguments;
// the token becomes $n+1 and the key $n+2. `$n` placeholders work with
// PostgreSQL and with SQLite (modernc.org/sqlite binds $N to the N-th
// argument).
//
// The statement is
//
//	UPDATE <Table> SET [<Set>, ]<Fence> = $n+1
//	 WHERE <Key> = $n+2 AND <Fence> <= $n+1 [AND (<Where>)]
//
// and the fence column must be NOT NULL (start it at 0).
type Update struct {
	Table string // table name, optionally schema-qualified
	Key   string // key column
	Fence string // fence column; "" means "fence"
	Set   string // business assignments, e.g. "qty = qty - $1"; may be empty
	Where string // business condition, e.g. "qty >= $1"; "" means none
}

var ident = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

func (u Update) fence() string {
	if u.Fence == "" {
		return "fence"
	}
	return u.Fence
}

func (u Update) check() error {
	for _, id := range []string{u.Table, u.Key, u.fence()} {
		if !ident.MatchString(id) {
			return fmt.Errorf("%w: identifier %q", ErrInvalidUpdate, id)
		}
	}
	return nil
}

// SQL returns the UPDATE for nargs business arguments and the probe query
// that tells a stale token from a failed condition.
func (u Update) SQL(nargs int) (update, probe string, err error) {
	if err := u.check(); err != nil {
		return "", "", err
	}
	if nargs < 0 {
		return "", "", fmt.Errorf("%w: %d arguments", ErrInvalidUpdate, nargs)
	}
	tok, key := "$"+strconv.Itoa(nargs+1), "$"+strconv.Itoa(nargs+2)
	set := u.fence() + " = " + tok
	if u.Set != "" {
		set = u.Set + ", " + set
	}
	update = "UPDATE " + u.Table + " SET " + set + " WHERE " + u.Key + " = " + key + " AND " + u.fence() + " <= " + tok
	if u.Where != "" {
		update += " AND (" + u.Where + ")"
	}
	probe = "SELECT " + u.fence() + " FROM " + u.Table + " WHERE " + u.Key + " = $1"
	return update, probe, nil
}

// SQLExecer is *sql.DB, *sql.Tx or *sql.Conn.
type SQLExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Exec runs the fenced update with database/sql. It returns nil when the
// row was written (token accepted, condition met), an error wrapping a
// *StaleError (ErrStale) when a higher token had written the row before,
// ErrCondition when the token was current but Where failed, ErrNoRow when
// no row has the key, or the database's error (each named by Wrap). Inside
// a transaction, the caller decides to commit.
func (u Update) Exec(ctx context.Context, db SQLExecer, token int64, key any, args ...any) error {
	update, probe, err := u.Prepare(token, len(args))
	if err != nil {
		return err
	}
	res, err := db.ExecContext(ctx, update, append(slices.Clip(args), token, key)...)
	if err != nil {
		return u.Wrap(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return u.Wrap(err)
	}
	if n > 0 {
		return nil
	}
	var seen int64
	err = db.QueryRowContext(ctx, probe, key).Scan(&seen)
	return u.Explain(token, seen, err, errors.Is(err, sql.ErrNoRows))
}

// Prepare checks token and returns the UPDATE and probe statements for
// nargs business arguments: the building block of an Exec for another
// driver (package fence/pgxfence). Run the UPDATE with the business
// arguments followed by token and key; if it wrote no row, run the probe
// with key and pass what it read to Explain.
func (u Update) Prepare(token int64, nargs int) (update, probe string, err error) {
	if err := checkToken(token); err != nil {
		return "", "", u.Wrap(err)
	}
	update, probe, err = u.SQL(nargs)
	if err != nil {
		return "", "", u.Wrap(err)
	}
	return update, probe, nil
}

// Wrap names the update on err, once, as every error of Exec, Prepare and
// Explain does: `dlock: fence update "<table>": <reason>` (for the Exec of
// another driver, as in package fence/pgxfence).
func (u Update) Wrap(err error) error { return wrap("update", u.Table, err) }

// Explain turns a zero-row update into its error from the probe that
// followed it: seen is the fence the probe read, probeErr its error, and
// noRow whether the probe found no row (the driver's no-rows error).
// Fences never decrease, so a fence <= token read after the update was
// <= token during it: the condition failed. A fence > token means a newer
// holder wrote: stale (whatever the condition would have said).
func (u Update) Explain(token, seen int64, probeErr error, noRow bool) error {
	err, noRows := probeErr, noRow
	switch {
	case noRows:
		return u.Wrap(ErrNoRow)
	case err != nil:
		return u.Wrap(fmt.Errorf("probe: %w", err))
	case seen > token:
		return u.Wrap(&StaleError{Token: token, Seen: seen})
	default:
		return u.Wrap(ErrCondition)
	}
}
