package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	dl "github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/inventory"
	"github.com/dlockgo/dlock/internal/pgtest"
	"github.com/dlockgo/dlock/internal/redistest"
)

// lockedBuffer is an io.Writer safe for the server goroutine and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// serving is one `dlock serve` run in-process.
type serving struct {
	url    string
	out    *lockedBuffer
	errOut *lockedBuffer
	stop   context.CancelFunc
	code   chan int
}

// startServe runs `dlock serve args...` until the test ends (or stopServe).
func startServe(t *testing.T, args ...string) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errb := &lockedBuffer{}
	s := &serving{out: &lockedBuffer{}, errOut: errb, stop: cancel, code: make(chan int, 1)}
	go func() {
		s.code <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), s.out, errb)
	}()
	t.Cleanup(func() {
		s.shutdown(t)
		http.DefaultClient.CloseIdleConnections()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listening.FindStringSubmatch(s.out.String()); m != nil {
			s.url = m[1]
			return s
		}
		select {
		case code := <-s.code:
			s.code <- code
			t.Fatalf("serve exited with %d: %s%s", code, s.out, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not listen in 30s: %s%s", s.out, errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shutdown stops the server (SIGINT's context cancel) and checks exit 0.
func (s *serving) shutdown(t *testing.T) {
	t.Helper()
	s.stop()
	select {
	case code := <-s.code:
		s.code <- code
		if code != 0 {
			t.Errorf("serve exited with %d: %s", code, s.out)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("serve did not stop within 30s")
	}
}

// call sends a request and decodes the JSON answer into a map.
func call(t *testing.T, method, url, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s %s: %d, not JSON: %q", method, url, resp.StatusCode, data)
	}
	return resp.StatusCode, resp.Header, m
}

func order(sku string, qty int, buyer, rid string) string {
	return fmt.Sprintf(`{"sku":%q,"qty":%d,"buyer":%q,"request_id":%q}`, sku, qty, buyer, rid)
}

func TestServeOrders(t *testing.T) {
	rdb := redistest.Start(t)
	db := filepath.Join(t.TempDir(), "shop.db")
	s := startServe(t, "--redis", "redis://"+rdb.Addr()+"/0", "--db", "sqlite:"+db, "--stock", "1001=6", "--max-body", "256")

	code, h, first := call(t, "POST", s.url+"/orders", order("1001", 2, "alice", "r1"))
	if code != http.StatusCreated || first["outcome"] != "sold" || first["order_id"] == nil {
		t.Fatalf("buy: %d %v", code, first)
	}
	code, h, again := call(t, "POST", s.url+"/orders", order("1001", 2, "alice", "r1"))
	if code != http.StatusCreated || again["order_id"] != first["order_id"] || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("duplicate request_id: %d %v %v, want the first result %v", code, h, again, first)
	}

	for _, tc := range []struct {
		name, body, code string
	}{
		{"bad JSON", `{"sku": "1001", "qty": `, "bad_json"},
		{"not an object", `[1,2]`, "bad_json"},
		{"wrong type", `{"sku":"1001","qty":"two","buyer":"a","request_id":"x"}`, "invalid_input"},
		{"unknown field", `{"sku":"1001","qty":1,"buyer":"a","request_id":"x","price":0}`, "bad_json"},
		{"two objects", order("1001", 1, "a", "x") + order("1001", 1, "a", "y"), "bad_json"},
		{"qty 0", order("1001", 0, "alice", "x"), "invalid_input"},
		{"qty above the limit", order("1001", 6, "alice", "x"), "invalid_input"},
		{"empty buyer", order("1001", 1, "", "x"), "invalid_input"},
		{"empty request id", order("1001", 1, "alice", ""), "invalid_input"},
		{"unknown sku", order("9999", 1, "alice", "x"), "unknown_sku"},
	} {
		code, _, body := call(t, "POST", s.url+"/orders", tc.body)
		if code != http.StatusBadRequest || body["code"] != tc.code || body["error"] == "" || strings.Contains(body["error"].(string), "Go ") {
			t.Errorf("%s: %d %v, want 400 %s", tc.name, code, body, tc.code)
		}
	}

	code, _, st := call(t, "GET", s.url+"/stock/1001", "")
	if code != http.StatusOK || st["qty"] != 4.0 || st["orders"] != 1.0 {
		t.Fatalf("stock after one sale and rejected requests: %d %v, want qty 4, 1 order", code, st)
	}
	if code, _, _ := call(t, "GET", s.url+"/stock/9999", ""); code != http.StatusNotFound {
		t.Fatalf("unknown sku stock: %d", code)
	}
	if code, _, _ := call(t, "GET", s.url+"/stock/a%7Bb%7D", ""); code != http.StatusBadRequest {
		t.Fatalf("malformed sku stock: %d", code)
	}
	if code, _, _ := call(t, "POST", s.url+"/orders", order("1001", 4, "bob", "r2")); code != http.StatusCreated {
		t.Fatalf("last units: %d", code)
	}
	if code, _, body := call(t, "POST", s.url+"/orders", order("1001", 1, "carol", "r3")); code != http.StatusConflict || body["outcome"] != "sold_out" {
		t.Fatalf("sold out: %d %v", code, body)
	}
	if code, _, rep := call(t, "GET", s.url+"/reconcile/1001", ""); code != http.StatusOK || rep["oversold"] != 0.0 || rep["qty"] != 0.0 || rep["problems"] != nil {
		t.Fatalf("reconcile: %d %v", code, rep)
	}
	if code, _, body := call(t, "GET", s.url+"/healthz", ""); code != http.StatusOK || body["status"] != "ok" {
		t.Fatalf("healthz: %d %v", code, body)
	}
	if resp, err := http.Get(s.url + "/metrics"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	s.shutdown(t)
	if _, err := http.Get(s.url + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

// TestServeBusy: a lock held elsewhere for longer than --wait is 429 with
// Retry-After, and the request may be retried.
func TestServeBusy(t *testing.T) {
	rdb := redistest.Start(t)
	db := filepath.Join(t.TempDir(), "shop.db")
	s := startServe(t, "--strategy", "lock", "--wait", "50ms", "--redis", "redis://"+rdb.Addr()+"/0", "--db", "sqlite:"+db, "--stock", "1001=3")
	locks, err := dl.New(redistest.Client(t, rdb))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	ctx := context.Background()
	held, err := locks.Lock(inventory.LockName("1001")).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	code, h, body := call(t, "POST", s.url+"/orders", order("1001", 1, "alice", "r1"))
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" || body["outcome"] != "busy" {
		t.Fatalf("while locked elsewhere: %d %v %v", code, h, body)
	}
	held.Unlock(ctx)
	if code, _, _ := call(t, "POST", s.url+"/orders", order("1001", 1, "alice", "r1")); code != http.StatusCreated {
		t.Fatalf("retry: %d", code)
	}
	// The lock signals are at /metrics: one busy answer, one grant.
	resp, err := http.Get(s.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`dlock_acquire_total{group="stock",result="acquired",shape="lock"} 1`,
		`dlock_acquire_total{group="stock",result="not_acquired",shape="lock"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, metrics)
		}
	}
}

// TestServeReplicas: three serve processes' worth of servers on one Redis
// and one PostgreSQL database share the sale; 60 buyers spread over them
// buy exactly the 10 units (per strategy that is safe across processes).
func TestServeReplicas(t *testing.T) {
	pg := pgtest.Start(t)
	for _, strategy := range []string{"lock", "prededuct"} {
		t.Run(strategy, func(t *testing.T) {
			rdb := redistest.Start(t)
			dsn := pgtest.DB(t, pg)
			args := []string{"--strategy", strategy, "--redis", "redis://" + rdb.Addr() + "/0", "--db", dsn, "--stock", "1001=10", "--claim-idle", "1s"}
			var replicas []*serving
			for range 3 {
				replicas = append(replicas, startServe(t, args...))
			}
			codes := buyAtOnce(replicas, 60, "1001", "r")
			if codes[http.StatusCreated] != 10 || codes[http.StatusConflict] != 50 {
				t.Fatalf("status codes %v, want 10×201 and 50×409", codes)
			}
			for _, r := range replicas { // graceful: every queued order persisted
				r.shutdown(t)
			}
			ctx := context.Background()
			st, err := inventory.Open(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			rep, err := inventory.Reconcile(ctx, st, "1001")
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Clean() || rep.Orders != 10 || rep.Qty != 0 {
				t.Fatalf("after shutdown: %s", rep)
			}
		})
	}
}

func TestServeMetricsHandlerMounted(t *testing.T) {
	metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "dlock_up 1\n") })
	srv := httptest.NewServer(newShopHandler(shop{maxBody: 1024}, metrics))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "dlock_up 1\n" {
		t.Fatalf("/metrics: %d %q", resp.StatusCode, body)
	}
}

func TestServeBadFlags(t *testing.T) {
	rdb := redistest.Start(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "shop.db")
	redisURL := "redis://" + rdb.Addr() + "/0"
	for _, args := range [][]string{
		{"--strategy", "nosuch", "--redis", redisURL, "--db", db},
		{"--redis", "not a url", "--db", db},
		{"--redis", redisURL, "--db", "mysql://x"},
		{"--redis", redisURL, "--db", db, "--stock", "1001"},
		{"--redis", redisURL, "--db", db, "--stock", "1001=-1"},
		{"--redis", redisURL, "--db", db, "--stock", "a b=1"},
		{"--redis", redisURL, "--db", db, "--max-body", "0"},
		{"--redis", redisURL, "--db", db, "--listen", "256.0.0.1:x"},
		{"--redis", redisURL, "--db", db, "extra"},
	} {
		var out, errb lockedBuffer
		code := run(context.Background(), append([]string{"serve"}, args...), &out, &errb)
		if code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, code, exitUsage, errb.String())
		}
		if strings.Count(strings.TrimSpace(errb.String()), "\n") > 0 {
			t.Errorf("%v: want a one-line error, got %q", args, errb.String())
		}
	}
}

// TestServeShutdownDrainsInFlight: a request waiting for the lock when the
// shutdown starts still gets its answer; new connections are refused.
func TestServeShutdownDrainsInFlight(t *testing.T) {
	rdb := redistest.Start(t)
	db := filepath.Join(t.TempDir(), "shop.db")
	s := startServe(t, "--strategy", "lock", "--wait", "20s", "--redis", "redis://"+rdb.Addr()+"/0", "--db", "sqlite:"+db, "--stock", "1001=3")
	ctx := context.Background()
	locks, err := dl.New(redistest.Client(t, rdb))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	held, err := locks.Lock(inventory.LockName("1001")).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	answer := make(chan int, 1)
	go func() {
		resp, err := http.Post(s.url+"/orders", "application/json", strings.NewReader(order("1001", 1, "alice", "r1")))
		if err != nil {
			answer <- 0
			return
		}
		resp.Body.Close()
		answer <- resp.StatusCode
	}()
	st, err := inventory.OpenSQLite(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	deadline := time.Now().Add(20 * time.Second)
	for { // the request has claimed its id: it is inside, waiting for the lock
		var n int
		st.DB().QueryRowContext(ctx, `SELECT COUNT(*) FROM idem WHERE biz_key = 'buy:r1'`).Scan(&n)
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the request never arrived")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.stop()
	for { // wait until the listener is closed
		c, err := http.Get(s.url + "/healthz")
		if err != nil {
			break
		}
		c.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections during shutdown")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if code := <-answer; code != http.StatusCreated {
		t.Fatalf("in-flight request: %d, want 201", code)
	}
	select {
	case code := <-s.code:
		s.code <- code
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit")
	}
}

// buyAtOnce posts n orders of one unit of sku at once, spread over the
// replicas in turn (request ids reqPrefix0 …), and counts the answers by
// status code (0: no answer).
func buyAtOnce(replicas []*serving, n int, sku, reqPrefix string) map[int]int {
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code := 0
			resp, err := http.Post(replicas[i%len(replicas)].url+"/orders", "application/json",
				strings.NewReader(order(sku, 1, fmt.Sprint("b", i), fmt.Sprint(reqPrefix, i))))
			if err == nil {
				code = resp.StatusCode
				resp.Body.Close()
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	return codes
}
