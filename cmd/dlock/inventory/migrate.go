package inventory

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations
var migrationFiles embed.FS

// migration is one embedded SQL file, NNN_name.sql, applied once.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the files of one dialect ("postgres" or "sqlite") in order.
func migrations(kind string) ([]migration, error) {
	dir := "migrations/" + kind
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range entries {
		v, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("inventory: migration %s: no version prefix", e.Name())
		}
		b, err := migrationFiles.ReadFile(dir + "/" + e.Name())
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies the migrations not applied yet, in one transaction that
// records them in schema_migrations. lock, if not empty, runs first so that
// concurrent processes migrate one at a time (SQLite's BEGIN IMMEDIATE
// already serialises them).
func migrate(ctx context.Context, db sqlDB, kind, lock string) error {
	ms, err := migrations(kind)
	if err != nil {
		return err
	}
	err = db.inTx(ctx, func(q querier) error {
		if lock != "" {
			if _, err := q.exec(ctx, lock); err != nil {
				return err
			}
		}
		if _, err := q.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL)`); err != nil {
			return err
		}
		for _, m := range ms {
			var n int64
			if err := q.queryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = $1`, m.version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			if _, err := q.exec(ctx, m.sql); err != nil {
				return fmt.Errorf("%s: %w", m.name, err)
			}
			if _, err := q.exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("inventory: migrate: %w", err)
	}
	return nil
}
