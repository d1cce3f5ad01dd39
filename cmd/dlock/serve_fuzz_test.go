package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlockgo/dlock/cmd/dlock/inventory"
)

// FuzzPostOrder feeds arbitrary bodies to the POST /orders handler (the
// conditional strategy on SQLite: no lock, so every answer comes from the
// body and the books). Whatever the body: no panic, no 5xx, a JSON answer,
// an error text without Go's type names, and nothing written unless the
// answer is a fresh 201. The seed corpus is in testdata/fuzz/FuzzPostOrder;
// `go test` runs it, `go test -fuzz FuzzPostOrder` explores.
func FuzzPostOrder(f *testing.F) {
	for _, seed := range []string{
		`{"sku":"1001","qty":1,"buyer":"alice","request_id":"r1"}`,
		`{"sku":"1001","qty":1,"buyer":"\u0000bob","request_id":"r2"}`,
		`{"sku":"1001","qty":1,"buyer":"bob","request_id":"r\u0000"}`,
		`{"sku":"1001","buyer":"a","request_id":"x"}`,
		`{"sku":"1001","qty":1.5,"buyer":"a","request_id":"x"}`,
		`{"sku":"1001","qty":"1","buyer":"a","request_id":"x"}`,
		`{"sku":"a{b}","qty":1,"buyer":"a","request_id":"x"}`,
		"{\"sku\":\"1001\",\"qty\":1,\"buyer\":\"\xff\",\"request_id\":\"x\"}",
		`[{"sku":"1001"}]`, `null`, ``, `{`, `{"sku":"1001","qty":1,"buyer":"a","request_id":"x"}{}`,
	} {
		f.Add([]byte(seed))
	}
	ctx := context.Background()
	st, err := inventory.OpenSQLite(ctx, filepath.Join(f.TempDir(), "shop.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	const initial = 1 << 40
	if _, err := st.AddSKU(ctx, "1001", initial); err != nil {
		f.Fatal(err)
	}
	strat, err := inventory.New("conditional", inventory.Deps{Store: st}, inventory.Options{})
	if err != nil {
		f.Fatal(err)
	}
	h := newShopHandler(shop{strategy: strat, store: st, maxBody: 4096}, nil)
	// ledger reads what a purchase writes: the stock, the orders and the
	// idempotency rows.
	type books struct{ qty, orders, idem int64 }
	ledger := func(t *testing.T) books {
		var b books
		s, err := st.Stock(ctx, "1001")
		if err != nil {
			t.Fatal(err)
		}
		b.qty = s.Qty
		if b.orders, _, err = st.Orders(ctx, "1001"); err != nil {
			t.Fatal(err)
		}
		if err := st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM idem`).Scan(&b.idem); err != nil {
			t.Fatal(err)
		}
		return b
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		before := ledger(t)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader(string(body)))
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body)
		}
		var resp map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("body %q: %d, answer not JSON: %q", body, rec.Code, rec.Body)
		}
		if msg, ok := resp["error"].(string); ok {
			for _, g := range goNames {
				if strings.Contains(msg, g) {
					t.Fatalf("body %q: error %q shows Go's %q", body, msg, g)
				}
			}
		}
		after := ledger(t)
		fresh := rec.Code == http.StatusCreated && rec.Header().Get("Idempotent-Replayed") == ""
		if !fresh {
			if after != before {
				t.Fatalf("body %q answered %d %s, yet the books moved: %+v -> %+v", body, rec.Code, rec.Body, before, after)
			}
			return
		}
		q, _ := resp["qty"].(float64)
		buyer, _ := resp["buyer"].(string)
		if after.orders != before.orders+1 || after.qty != before.qty-int64(q) || !utf8.ValidString(buyer) || strings.ContainsRune(buyer, 0) {
			t.Fatalf("body %q sold %v: books %+v -> %+v", body, resp, before, after)
		}
	})
}
