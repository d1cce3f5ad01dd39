package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dl "github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/internal/pgtest"
	"github.com/dlockgo/dlock/internal/redistest"
)

// seckillRow is the part of a `seckill --json` row these tests read.
type seckillRow struct {
	Strategy string   `json:"strategy"`
	Sold     int64    `json:"sold"`
	Busy     int      `json:"busy"`
	Unsold   int64    `json:"unsold"`
	Verdict  string   `json:"verdict"`
	Problems []string `json:"problems"`
}

func seckillRows(t *testing.T, out string) []seckillRow {
	t.Helper()
	var rows []seckillRow
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var r seckillRow
		if err := dec.Decode(&r); err != nil {
			t.Fatalf("bad JSON: %v\n%s", err, out)
		}
		rows = append(rows, r)
	}
	return rows
}

// TestSeckillFlagsUnsold: a strategy that turns buyers away busy while
// units are left is not "clean": the verdict is UNSOLD and a line says how
// many units were left and why.
func TestSeckillFlagsUnsold(t *testing.T) {
	rdb := redistest.Start(t)
	s := startServe(t, "--strategy", "lock", "--wait", "20ms", "--redis", "redis://"+rdb.Addr()+"/0",
		"--db", "sqlite:"+filepath.Join(t.TempDir(), "shop.db"), "--stock", "1001=5")
	locks, err := dl.New(redistest.Client(t, rdb))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	held, err := locks.Lock(inventory.LockName("1001")).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.Background())
	code, out, stderr := dlock(t, "seckill", "--target", s.url, "--sku", "1001", "--buyers", "40", "--concurrency", "8", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows := seckillRows(t, out)
	if len(rows) != 1 {
		t.Fatalf("rows %v", rows)
	}
	r := rows[0]
	if r.Sold != 0 || r.Busy != 40 || r.Unsold != 5 || r.Verdict != "UNSOLD" || !strings.Contains(strings.Join(r.Problems, ";"), "left 5 of 5 units unsold while turning 40 buyers away") {
		t.Fatalf("row %+v: want 40 busy, 5 unsold, verdict UNSOLD and the reason", r)
	}
	code, out, _ = dlock(t, "seckill", "--target", s.url, "--sku", "1001", "--buyers", "10")
	if code != 0 || !strings.Contains(out, "UNSOLD") || strings.Contains(out, " clean") {
		t.Fatalf("table (exit %d) does not say UNSOLD:\n%s", code, out)
	}
}

// TestSeckillCleansUp: against a PostgreSQL database and a Redis the user
// gave, the run removes the skus, orders, idempotency rows and Redis keys it
// made, and says so; --keep leaves them and says where.
func TestSeckillCleansUp(t *testing.T) {
	pg := pgtest.Start(t)
	dsn := pgtest.DB(t, pg)
	srv := redistest.Start(t)
	rdb := redistest.Client(t, srv)
	ctx := context.Background()
	st, err := inventory.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.AddSKU(ctx, "mine", 7); err != nil { // the user's own row stays
		t.Fatal(err)
	}
	args := []string{"seckill", "--db", dsn, "--redis", "redis://" + srv.Addr() + "/0", "--buyers", "60", "--strategy", "lock", "--strategy", "fenced", "--strategy", "prededuct"}
	code, out, stderr := dlock(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "removed from the database and Redis what the run made") {
		t.Fatalf("stdout does not say what was removed:\n%s", out)
	}
	skus, err := st.SKUs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(skus) != 1 || skus[0] != "mine" {
		t.Fatalf("skus after the run: %v, want only the user's", skus)
	}
	var orders, idem int
	if err := st.(*inventory.PostgresStore).Pool().QueryRow(ctx, `SELECT (SELECT COUNT(*) FROM orders), (SELECT COUNT(*) FROM idem)`).Scan(&orders, &idem); err != nil {
		t.Fatal(err)
	}
	if orders != 0 || idem != 0 {
		t.Fatalf("%d orders and %d idem rows left", orders, idem)
	}
	for _, k := range rdb.Keys(ctx, "*").Val() {
		if !strings.HasPrefix(k, "dlock:fence:{") { // a hash slot's fence counter stays (it serves every lock of the slot)
			t.Fatalf("redis keys left: %v", rdb.Keys(ctx, "*").Val())
		}
	}

	code, out, stderr = dlock(t, append(args, "--keep")...)
	if code != 0 {
		t.Fatalf("--keep: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "left, as --keep asks") {
		t.Fatalf("--keep: stdout does not say what was left:\n%s", out)
	}
	if skus, _ := st.SKUs(ctx); len(skus) != 4 {
		t.Fatalf("--keep: skus %v, want the user's and three of the run", skus)
	}
	if n := rdb.DBSize(ctx).Val(); n == 0 {
		t.Fatal("--keep: no Redis key left")
	}
}

// TestProgress: nothing for a part's first 2 s; then a line every 5 s off
// a terminal, and one at the end of a part that had a line.
func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	p := newProgress(&buf, true)
	p.now = func() time.Time { return now }
	step := func(d time.Duration, what string, done int) {
		now = now.Add(d)
		p.update(what, done, 100)
	}
	step(0, "lock", 1)
	step(time.Second, "lock", 50)
	if buf.Len() != 0 {
		t.Fatalf("progress within 2 s: %q", buf.String())
	}
	step(1500*time.Millisecond, "lock", 60)      // 2.5 s: a line
	step(time.Second, "lock", 70)                // within 5 s of the last line
	step(100*time.Millisecond, "lock", 100)      // the end of a part with a line
	step(100*time.Millisecond, "prededuct", 1)   // a new part: its own 2 s
	step(500*time.Millisecond, "prededuct", 100) // ends within them: quiet
	step(0, "fenced", 1)
	step(2500*time.Millisecond, "fenced", 40)
	want := "lock: 60/100 (60%), 3s elapsed\nlock: 100/100 (100%), 4s elapsed\nfenced: 40/100 (40%), 3s elapsed\n"
	if buf.String() != want {
		t.Fatalf("progress %q, want %q", buf.String(), want)
	}
	off := newProgress(&buf, false)
	off.now = p.now
	off.update("x", 1, 2)
	if buf.String() != want {
		t.Fatal("a disabled progress wrote")
	}
}
