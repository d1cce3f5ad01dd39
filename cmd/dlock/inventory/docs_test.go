package inventory_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/internal/redistest"
)

// docsShop is the shop of docs/INVENTORY.md: a store, a strategy, a buy and
// the books checked afterwards.
func docsShop(ctx context.Context, rdb *redis.Client, dsn string) (inventory.Result, inventory.Report, error) {
	st, err := inventory.Open(ctx, dsn) // "postgres://…" or "sqlite:/var/lib/shop.db"
	if err != nil {
		return inventory.Result{}, inventory.Report{}, err
	}
	defer st.Close()
	if _, err := st.AddSKU(ctx, "1001", 10); err != nil { // false if it was there already
		return inventory.Result{}, inventory.Report{}, err
	}
	locks, err := dlock.New(rdb)
	if err != nil {
		return inventory.Result{}, inventory.Report{}, err
	}
	defer locks.Close()
	shop, err := inventory.New("fenced", inventory.Deps{Store: st, Locks: locks, Redis: rdb}, inventory.Options{})
	if err != nil {
		return inventory.Result{}, inventory.Report{}, err
	}
	res, err := shop.Buy(ctx, "1001", 1, "alice", "req-42") // res.Outcome: sold, sold_out, busy or error
	if err != nil {
		return res, inventory.Report{}, err
	}
	rep, err := shop.Reconcile(ctx, "1001") // rep.Clean(), rep.Oversold, rep.Undersold, rep.Pending
	return res, rep, err
}

func TestDocsShop(t *testing.T) {
	rdb := redistest.Client(t, redistest.Start(t))
	res, rep, err := docsShop(context.Background(), rdb, "sqlite:"+filepath.Join(t.TempDir(), "shop.db"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(res.Outcome, " ", rep.Clean(), " ", rep); got != "sold true 1001: initial 10, left 9, 1 orders for 1 units" {
		t.Fatalf("outcome, clean, report = %s", got)
	}
}
