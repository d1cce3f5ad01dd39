package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	dl "github.com/dlockgo/dlock"
)

// dlockIn runs the command with stdin and returns its exit code and output.
func dlockIn(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	root := newRoot()
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&errb)
	code := exitOK
	if err := root.ExecuteContext(context.Background()); err != nil {
		code = exitError
		var ue usageError
		if errors.As(err, &ue) {
			code = exitUsage
		}
		errb.WriteString(err.Error())
	}
	return code, out.String(), errb.String()
}

func TestUnlockForce(t *testing.T) {
	url, c := lockServer(t)
	ctx := context.Background()
	l, err := c.Lock("stock:9").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Declined (and end of input): nothing removed.
	for _, answer := range []string{"n\n", ""} {
		code, out, stderr := dlockIn(t, answer, "unlock", "--force", "stock:9", "--redis", url)
		if code != exitError || !strings.Contains(stderr, "aborted") || !strings.Contains(stderr, "[y/N]") || !strings.Contains(out, "cli-test") {
			t.Fatalf("answer %q: exit %d\nstdout %s\nstderr %s", answer, code, out, stderr)
		}
		if err := l.Verify(ctx); err != nil {
			t.Fatalf("answer %q: lock gone: %v", answer, err)
		}
	}

	code, out, stderr := dlockIn(t, "y\n", "unlock", "--force", "stock:9", "--redis", url)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "removed 1 key(s):\n  dlock:{stock:9}\n") || !strings.Contains(out, "cli-test") {
		t.Fatalf("output:\n%s", out)
	}
	if err := l.Verify(ctx); !errors.Is(err, dl.ErrLockLost) {
		t.Fatalf("holder after forced unlock: %v, want ErrLockLost", err)
	}
	next, err := c.Lock("stock:9").Acquire(ctx, dl.Wait(0))
	if err != nil {
		t.Fatal(err)
	}
	if next.Token() <= l.Token() {
		t.Fatalf("token %d after forced unlock, want > %d", next.Token(), l.Token())
	}

	// --yes --json: no question, the removal as JSON on stdout.
	code, out, stderr = dlockIn(t, "", "unlock", "--force", "stock:9", "--yes", "--json", "--redis", url)
	if code != exitOK || strings.Contains(stderr, "[y/N]") {
		t.Fatalf("exit %d, stderr %s", code, stderr)
	}
	var r struct { // snake_case keys, as inspect --json
		Info infoJSON `json:"info"`
		Keys []string `json:"keys"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(r.Keys) != 1 || r.Keys[0] != "dlock:{stock:9}" || len(r.Info.Holders) != 1 || r.Info.Holders[0].Fence != next.Token() {
		t.Fatalf("removal %+v, want dlock:{stock:9} held with token %d", r, next.Token())
	}
	if m := regexp.MustCompile(`"[A-Z]\w*":`).FindString(out); m != "" {
		t.Errorf("PascalCase key %s:\n%s", m, out)
	}

	// A free lock: nothing to do, no question.
	code, out, _ = dlockIn(t, "", "unlock", "--force", "stock:9", "--redis", url)
	if code != exitOK || !strings.Contains(out, "not held") {
		t.Fatalf("free lock: exit %d\n%s", code, out)
	}
	code, out, _ = dlockIn(t, "", "unlock", "--force", "stock:9", "--json", "--redis", url)
	if code != exitOK || !regexp.MustCompile(`"keys": \[\]`).MatchString(out) || strings.Contains(out, "null") {
		t.Fatalf("free lock --json: exit %d, want keys [] and no null:\n%s", code, out)
	}
}

// --prefix selects another application's locks.
func TestUnlockPrefix(t *testing.T) {
	url, c := lockServer(t)
	other, err := dl.New(redisOf(t, url), dl.Config{Prefix: "shop:"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	ctx := context.Background()
	mine, err := c.Mutex("x:1").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := other.Mutex("x:1").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	code, out, stderr := dlockIn(t, "", "unlock", "--force", "x:1", "--yes", "--prefix", "shop:", "--redis", url)
	if code != exitOK || !strings.Contains(out, "shop:{x:1}") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if err := mine.Verify(ctx); err != nil {
		t.Fatalf("the default prefix's lock was touched: %v", err)
	}
	if err := theirs.Verify(ctx); !errors.Is(err, dl.ErrLockLost) {
		t.Fatalf("shop: lock: %v, want ErrLockLost", err)
	}
}

// redisOf returns a go-redis client of url, closed at cleanup.
func redisOf(t *testing.T, url string) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
