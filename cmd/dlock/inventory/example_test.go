package inventory_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dlockgo/dlock/cmd/dlock/inventory"
)

// The default strategy: one conditional UPDATE per purchase, idempotent
// per request id.
func ExampleConditional() {
	dir, _ := os.MkdirTemp("", "inventory-example-")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := inventory.OpenSQLite(ctx, filepath.Join(dir, "shop.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	st.AddSKU(ctx, "1001", 3)

	shop, _ := inventory.NewConditional(st, inventory.Options{})
	res, _ := shop.Buy(ctx, "1001", 2, "alice", "req-1")
	fmt.Println(res.Outcome, res.Left)
	res, _ = shop.Buy(ctx, "1001", 2, "alice", "req-1") // a retry
	fmt.Println(res.Outcome, res.Replayed)
	res, _ = shop.Buy(ctx, "1001", 2, "bob", "req-2")
	fmt.Println(res.Outcome)
	_, err = shop.Buy(ctx, "1001", 0, "bob", "req-3")
	fmt.Println(err)
	rep, _ := shop.Reconcile(ctx, "1001")
	fmt.Println(rep.Clean(), rep)
	// Output:
	// sold 1
	// sold true
	// sold_out
	// inventory: invalid input: qty 0 (want 1..5)
	// true 1001: initial 3, left 1, 1 orders for 2 units
}
