package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/internal/pgtest"
	"github.com/dlockgo/dlock/internal/redistest"
)

// goNames are fragments of Go's own error texts a client must never see.
var goNames = []string{"Go ", "int64", "orderRequest", "orderBody", "struct", "*string", "json: "}

// stockOf reads GET /stock/{sku}: qty and orders.
func stockOf(t *testing.T, url, sku string) (qty, orders float64) {
	t.Helper()
	code, _, st := call(t, "GET", url+"/stock/"+sku, "")
	if code != http.StatusOK {
		t.Fatalf("GET /stock/%s: %d %v", sku, code, st)
	}
	return st["qty"].(float64), st["orders"].(float64)
}

// TestServeHTTPAnswers: wrong methods are 405 with Allow, an oversized body
// 413, a missing field "missing", a wrong type named in JSON terms; none
// writes anything.
func TestServeHTTPAnswers(t *testing.T) {
	rdb := redistest.Start(t)
	s := startServe(t, "--redis", "redis://"+rdb.Addr()+"/0", "--db", "sqlite:"+filepath.Join(t.TempDir(), "shop.db"),
		"--stock", "1001=6", "--max-body", "256")
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", "/orders", "POST"},
		{"PUT", "/orders", "POST"},
		{"DELETE", "/stock/1001", "GET, HEAD"},
		{"POST", "/reconcile/1001", "GET, HEAD"},
		{"POST", "/healthz", "GET, HEAD"},
		{"POST", "/metrics", "GET, HEAD"},
	} {
		code, h, body := call(t, tc.method, s.url+tc.path, "")
		if code != http.StatusMethodNotAllowed || h.Get("Allow") != tc.allow || body["code"] != "method_not_allowed" {
			t.Errorf("%s %s: %d Allow %q %v, want 405 with Allow %q", tc.method, tc.path, code, h.Get("Allow"), body, tc.allow)
		}
	}
	if code, _, body := call(t, "GET", s.url+"/nope", ""); code != http.StatusNotFound || body["code"] != "not_found" {
		t.Errorf("GET /nope: %d %v, want 404", code, body)
	}
	if code, _, body := call(t, "POST", s.url+"/orders", order("1001", 1, strings.Repeat("b", 300), "x")); code != http.StatusRequestEntityTooLarge || body["code"] != "body_too_large" {
		t.Errorf("oversized body: %d %v, want 413 body_too_large", code, body)
	}
	for _, tc := range []struct{ name, body, code, want string }{
		{"missing qty", `{"sku":"1001","buyer":"a","request_id":"x"}`, "invalid_input", "missing: qty"},
		{"all missing", `{}`, "invalid_input", "missing: sku, qty, buyer, request_id"},
		{"null", `null`, "invalid_input", "missing: sku, qty, buyer, request_id"},
		{"qty a fraction", `{"sku":"1001","qty":1.5,"buyer":"a","request_id":"x"}`, "invalid_input", "qty: want a whole number, got number 1.5"},
		{"qty a string", `{"sku":"1001","qty":"1","buyer":"a","request_id":"x"}`, "invalid_input", "qty: want a whole number, got a string"},
		{"qty too large", `{"sku":"1001","qty":99999999999999999999,"buyer":"a","request_id":"x"}`, "invalid_input", "qty: want a whole number"},
		{"buyer a number", `{"sku":"1001","qty":1,"buyer":7,"request_id":"x"}`, "invalid_input", "buyer: want a string, got number"},
		{"sku an object", `{"sku":{},"qty":1,"buyer":"a","request_id":"x"}`, "invalid_input", "sku: want a string, got an object"},
		{"not an object", `[1]`, "bad_json", "want a JSON object, got an array"},
		{"empty", ``, "bad_json", "empty"},
		{"truncated", `{"sku":"1001",`, "bad_json", "ends early"},
		{"malformed", `{"sku" "1001"}`, "bad_json", "malformed JSON at byte"},
		{"unknown field", `{"sku":"1001","qty":1,"buyer":"a","request_id":"x","price":0}`, "bad_json", `unknown field "price"`},
		{"not UTF-8", "{\"sku\":\"1001\",\"qty\":1,\"buyer\":\"b\xffb\",\"request_id\":\"x\"}", "invalid_input", "not valid UTF-8"},
		{"NUL in buyer", `{"sku":"1001","qty":1,"buyer":"\u0000bob","request_id":"x"}`, "invalid_input", "control character"},
		{"qty 0", order("1001", 0, "a", "x"), "invalid_input", "qty 0"},
	} {
		code, _, body := call(t, "POST", s.url+"/orders", tc.body)
		msg, _ := body["error"].(string)
		if code != http.StatusBadRequest || body["code"] != tc.code || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: %d %v, want 400 %s with %q", tc.name, code, body, tc.code, tc.want)
		}
		for _, g := range goNames {
			if strings.Contains(msg, g) {
				t.Errorf("%s: error %q shows Go's %q", tc.name, msg, g)
			}
		}
	}
	if qty, orders := stockOf(t, s.url, "1001"); qty != 6 || orders != 0 {
		t.Fatalf("after rejected requests: qty %v, %v orders; want 6 and 0", qty, orders)
	}
}

// TestServeRejectsNUL: a NUL byte or invalid text in buyer or request_id is
// 400 invalid_input on PostgreSQL (which cannot store NUL) as on SQLite,
// and nothing is written.
func TestServeRejectsNUL(t *testing.T) {
	pg := pgtest.Start(t)
	rdb := redistest.Start(t)
	for _, db := range []string{"postgres", "sqlite"} {
		for _, strategy := range []string{"conditional", "lock"} {
			t.Run(db+"/"+strategy, func(t *testing.T) {
				dsn := "sqlite:" + filepath.Join(t.TempDir(), "shop.db")
				if db == "postgres" {
					dsn = pgtest.DB(t, pg)
				}
				s := startServe(t, "--strategy", strategy, "--redis", "redis://"+rdb.Addr()+"/0", "--db", dsn, "--stock", "1001=6")
				for _, body := range []string{
					`{"sku":"1001","qty":1,"buyer":"\u0000bob","request_id":"r1"}`,
					`{"sku":"1001","qty":1,"buyer":"bob","request_id":"r\u00001"}`,
					`{"sku":"1001","qty":1,"buyer":"bob\u0007","request_id":"r1"}`,
					`{"sku":"1001","qty":1,"buyer":"bob","request_id":"` + strings.Repeat("r", inventory.MaxIDLen+1) + `"}`,
				} {
					if code, _, resp := call(t, "POST", s.url+"/orders", body); code != http.StatusBadRequest || resp["code"] != "invalid_input" {
						t.Errorf("%s: %d %v, want 400 invalid_input", body, code, resp)
					}
				}
				if qty, orders := stockOf(t, s.url, "1001"); qty != 6 || orders != 0 {
					t.Fatalf("after rejected requests: qty %v, %v orders; want 6 and 0", qty, orders)
				}
				if code, _, _ := call(t, "POST", s.url+"/orders", order("1001", 1, "bob ✓", "r1")); code != http.StatusCreated {
					t.Fatalf("valid UTF-8 buyer: %d, want 201", code)
				}
			})
		}
	}
}

// TestServeRedisDown: with Redis killed, a lock strategy answers orders 503
// with Retry-After and its health check 503, while a conditional replica,
// which needs no Redis, stays healthy and sells; both sell again once Redis
// is back.
func TestServeRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "shop.db")
	redisURL := "redis://" + srv.Addr() + "/0"
	locked := startServe(t, "--strategy", "lock", "--wait", "2s", "--redis", redisURL, "--db", db, "--stock", "1001=10")
	cond := startServe(t, "--strategy", "conditional", "--redis", redisURL, "--db", db)
	if code, _, _ := call(t, "POST", locked.url+"/orders", order("1001", 1, "a", "r0")); code != http.StatusCreated {
		t.Fatalf("before the kill: %d", code)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	code, h, body := call(t, "POST", locked.url+"/orders", order("1001", 1, "a", "r1"))
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" || body["code"] != "unavailable" {
		t.Fatalf("lock, Redis down: %d %v %v, want 503 unavailable with Retry-After", code, h, body)
	}
	for _, g := range goNames {
		if strings.Contains(body["error"].(string), g) {
			t.Errorf("error %q shows Go's %q", body["error"], g)
		}
	}
	if code, h, body := call(t, "GET", locked.url+"/healthz", ""); code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("lock healthz, Redis down: %d %v, want 503", code, body)
	} else if p, _ := body["problems"].(map[string]any); p["redis"] == nil {
		t.Fatalf("lock healthz names no Redis problem: %v", body)
	}
	code, _, body = call(t, "GET", cond.url+"/healthz", "")
	if checks, _ := body["checks"].(map[string]any); code != http.StatusOK || body["status"] != "ok" || checks["redis"] != "not needed by conditional" {
		t.Fatalf("conditional healthz, Redis down: %d %v, want 200 (Redis not needed)", code, body)
	}
	if code, _, body := call(t, "POST", cond.url+"/orders", order("1001", 1, "b", "c1")); code != http.StatusCreated {
		t.Fatalf("conditional, Redis down: %d %v, want 201", code, body)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, _, body := call(t, "POST", locked.url+"/orders", order("1001", 1, "a", "r1"))
		if code == http.StatusCreated {
			break
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("lock, Redis back: %d %v, want 201", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _, body := call(t, "GET", locked.url+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("lock healthz, Redis back: %d %v", code, body)
	}
	if qty, orders := stockOf(t, locked.url, "1001"); qty != 7 || orders != 3 {
		t.Fatalf("qty %v, %v orders; want 7 and 3", qty, orders)
	}
}

// TestServeMetricsEveryStrategy: /metrics carries the shop's orders by
// result, its latency histogram and the Go and process collectors, also
// for strategies that take no lock.
func TestServeMetricsEveryStrategy(t *testing.T) {
	rdb := redistest.Start(t)
	for _, strategy := range []string{"conditional", "naive", "lock"} {
		t.Run(strategy, func(t *testing.T) {
			s := startServe(t, "--strategy", strategy, "--redis", "redis://"+rdb.Addr()+"/0",
				"--db", "sqlite:"+filepath.Join(t.TempDir(), "shop.db"), "--stock", "m1=1")
			call(t, "POST", s.url+"/orders", order("m1", 1, "a", "r1"))
			call(t, "POST", s.url+"/orders", order("m1", 1, "b", "r2"))
			call(t, "POST", s.url+"/orders", `{"sku":"m1"}`)
			resp, err := http.Get(s.url + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			text, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, want := range []string{
				`dlock_shop_orders_total{result="sold",strategy="` + strategy + `"} 1`,
				`dlock_shop_orders_total{result="sold_out",strategy="` + strategy + `"} 1`,
				`dlock_shop_orders_total{result="invalid_input",strategy="` + strategy + `"} 1`,
				`dlock_shop_orders_total{result="unavailable",strategy="` + strategy + `"} 0`,
				`dlock_shop_order_duration_seconds_count{strategy="` + strategy + `"} 3`,
				"go_goroutines ", "process_resident_memory_bytes ",
			} {
				if !bytes.Contains(text, []byte(want)) {
					t.Errorf("/metrics lacks %q", want)
				}
			}
		})
	}
}

// TestServeStockOfExistingSKU: --stock for a sku that exists changes
// nothing and says so on stderr, with what the database holds.
func TestServeStockOfExistingSKU(t *testing.T) {
	rdb := redistest.Start(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "shop.db")
	args := []string{"--redis", "redis://" + rdb.Addr() + "/0", "--db", db}
	s := startServe(t, append(args, "--stock", "1001=5")...)
	if code, _, _ := call(t, "POST", s.url+"/orders", order("1001", 1, "a", "r1")); code != http.StatusCreated {
		t.Fatalf("buy: %d", code)
	}
	if strings.Contains(s.errOut.String(), "ignored") {
		t.Fatalf("a new sku was reported ignored: %q", s.errOut)
	}
	s.shutdown(t)
	s = startServe(t, append(args, "--stock", "1001=10", "--stock", "1002=3")...)
	notice := s.errOut.String()
	if !strings.Contains(notice, "--stock 1001=10 ignored") || !strings.Contains(notice, "put on sale with 5, 4 left") || strings.Contains(notice, "1002") {
		t.Fatalf("stderr %q: want a notice that --stock 1001=10 was ignored (5 put on sale, 4 left), none for 1002", notice)
	}
	if qty, _ := stockOf(t, s.url, "1001"); qty != 4 {
		t.Fatalf("1001 qty %v, want 4 (left as it was)", qty)
	}
	if qty, _ := stockOf(t, s.url, "1002"); qty != 3 {
		t.Fatalf("1002 qty %v, want 3 (new)", qty)
	}
}

// TestServeDefaultDatabase: without --db the shop is SQLite in the user's
// data directory, not the working directory, and serve says where.
func TestServeDefaultDatabase(t *testing.T) {
	rdb := redistest.Start(t)
	data, work := t.TempDir(), t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	t.Setenv("DLOCK_DB", "")
	t.Chdir(work)
	s := startServe(t, "--redis", "redis://"+rdb.Addr()+"/0", "--stock", "1001=1")
	want := "sqlite:" + filepath.Join(data, "dlock", "shop.db")
	if !strings.Contains(s.out.String(), "database "+want) {
		t.Fatalf("stdout %q does not say the database is %s", s.out, want)
	}
	if _, err := os.Stat(filepath.Join(data, "dlock", "shop.db")); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(work); len(left) != 0 {
		t.Fatalf("serve wrote %v into the working directory", left)
	}
}

// TestServeConditionalWithoutRedis: a strategy that needs no Redis starts,
// is healthy and sells with no Redis at all, and says so; one that needs it
// refuses to start (exit 1: Redis is down, the input is fine).
func TestServeConditionalWithoutRedis(t *testing.T) {
	db := "sqlite:" + filepath.Join(t.TempDir(), "shop.db")
	s := startServe(t, "--redis", "redis://127.0.0.1:1/0", "--db", db, "--stock", "1001=2")
	if code, _, body := call(t, "GET", s.url+"/healthz", ""); code != http.StatusOK {
		t.Fatalf("healthz: %d %v, want 200", code, body)
	}
	if code, _, body := call(t, "POST", s.url+"/orders", order("1001", 1, "a", "r1")); code != http.StatusCreated {
		t.Fatalf("order: %d %v, want 201", code, body)
	}
	if want := "redis: redis://127.0.0.1:1/0 (from --redis; not needed by strategy conditional)\n"; s.errOut.String() != want {
		t.Errorf("stderr %q, want %q", s.errOut.String(), want)
	}
	var out, errb lockedBuffer
	if code := run(context.Background(), []string{"serve", "--strategy", "fenced", "--redis", "redis://127.0.0.1:1/0", "--db", db}, &out, &errb); code != exitError {
		t.Fatalf("fenced without Redis: exit %d, want %d: %s", code, exitError, errb.String())
	}
}
