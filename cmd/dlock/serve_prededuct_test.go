package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/redistest"
)

// TestServePredeductRedisRestart: redis-server is killed under two
// prededuct replicas, then started empty on the same port. While it is
// down orders and health answer 503 with Retry-After; once it is back,
// without restarting serve, the books never show a false undersale, health
// comes back, and the orders sell exactly what the database has left.
func TestServePredeductRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	db := "sqlite:" + filepath.Join(t.TempDir(), "shop.db")
	args := []string{"--strategy", "prededuct", "--redis", "redis://" + srv.Addr() + "/0", "--db", db, "--stock", "1001=10", "--claim-idle", "1s"}
	replicas := []*serving{startServe(t, args...), startServe(t, args...)}
	for i := range 4 {
		if code, _, body := call(t, "POST", replicas[i%2].url+"/orders", order("1001", 1, "early", fmt.Sprint("early-", i))); code != http.StatusCreated {
			t.Fatalf("before the kill: %d %v", code, body)
		}
	}
	waitFor(t, "the 4 orders persisted", func() bool { _, orders := stockOf(t, replicas[0].url, "1001"); return orders == 4 })

	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	code, h, body := call(t, "POST", replicas[0].url+"/orders", order("1001", 1, "b", "down-1"))
	if code != http.StatusServiceUnavailable || h.Get("Retry-After") == "" {
		t.Fatalf("Redis down: %d %v %v, want 503 with Retry-After", code, h, body)
	}
	if code, _, body := call(t, "GET", replicas[1].url+"/healthz", ""); code != http.StatusServiceUnavailable {
		t.Fatalf("healthz with Redis down: %d %v, want 503", code, body)
	}

	if err := srv.Restart(); err != nil { // empty, same port
		t.Fatal(err)
	}
	code, _, rep := call(t, "GET", replicas[1].url+"/reconcile/1001", "")
	if code != http.StatusOK || rep["undersold"] != 0.0 || strings.Contains(fmt.Sprint(rep["problems"]), "undersold") {
		t.Fatalf("reconcile after the loss: %d %v, want no undersale", code, rep)
	}
	if rep["redis_missing"] == true && !strings.Contains(fmt.Sprint(rep["problems"]), "lost its data") {
		t.Fatalf("reconcile with Redis missing the stock does not say it lost its data: %v", rep)
	}
	waitFor(t, "healthz 200 after the restart", func() bool {
		code, _, _ := call(t, "GET", replicas[1].url+"/healthz", "")
		return code == http.StatusOK
	})

	codes := buyAtOnce(replicas, 30, "1001", "late-")
	if codes[http.StatusCreated] != 6 || codes[http.StatusConflict] != 24 {
		t.Fatalf("after the restart: status codes %v, want 6×201 and 24×409", codes)
	}
	waitFor(t, "all 10 orders persisted", func() bool { _, orders := stockOf(t, replicas[0].url, "1001"); return orders == 10 })
	code, _, rep = call(t, "GET", replicas[0].url+"/reconcile/1001", "")
	if code != http.StatusOK || rep["problems"] != nil || rep["qty"] != 0.0 || rep["redis_qty"] != 0.0 || rep["oversold"] != 0.0 {
		t.Fatalf("reconcile: %d %v", code, rep)
	}
}

// waitFor polls cond every 20 ms for up to 30 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
