package main

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dl "github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/internal/redistest"
)

// lockServer starts a redis-server and returns its URL and a dlock Client
// (label "cli-test") on it.
func lockServer(t *testing.T) (string, *dl.Client) {
	t.Helper()
	srv := redistest.Start(t)
	c, err := dl.New(redistest.Client(t, srv), dl.Config{Label: "cli-test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return "redis://" + srv.Addr() + "/0", c
}

func TestInspectHolder(t *testing.T) {
	url, c := lockServer(t)
	ctx := context.Background()
	outer, err := c.Lock("stock:1001").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Lock("stock:1001").Acquire(outer.Context()); err != nil { // hold count 2
		t.Fatal(err)
	}
	mu, err := c.Mutex("coupon:7").Acquire(ctx, dl.LeaseTime(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()

	for _, tc := range []struct {
		name, shape string
		count       int
		token       int64
	}{{"stock:1001", "lock", 2, outer.Token()}, {"coupon:7", "mutex", 1, mu.Token()}} {
		code, out, stderr := dlock(t, "inspect", tc.name, "--redis", url)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.name, code, stderr)
		}
		for _, want := range []string{`(?m)^state\s+held$`, `(?m)^shape\s+` + tc.shape + `$`, `(?m)^ttl\s+\d`,
			`(?m)^last token\s+` + strconv.FormatInt(tc.token, 10) + `$`, `holders \(1\)`, regexp.QuoteMeta(host)} {
			if !regexp.MustCompile(want).MatchString(out) {
				t.Errorf("%s: output does not match %q:\n%s", tc.name, want, out)
			}
		}
		if !regexp.MustCompile(`(?m)^  \w{8}\s+\S+\s+\d+\s+cli-test\s+.*ago\)\s+` + strconv.Itoa(tc.count) + `\s+` + strconv.FormatInt(tc.token, 10)).MatchString(out) {
			t.Errorf("%s: no holder row with count %d and token %d:\n%s", tc.name, tc.count, tc.token, out)
		}

		code, out, stderr = dlock(t, "inspect", tc.name, "--redis", url, "--json")
		if code != 0 {
			t.Fatalf("%s --json: exit %d: %s", tc.name, code, stderr)
		}
		var info infoJSON
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("%s --json: %v\n%s", tc.name, err, out)
		}
		if !info.Held || info.Shape != tc.shape || len(info.Holders) != 1 || info.Name != tc.name {
			t.Fatalf("%s --json: %+v", tc.name, info)
		}
		h := info.Holders[0]
		if h.Fence != tc.token || h.Count != tc.count || h.Label != "cli-test" || h.PID != os.Getpid() || h.Host != host ||
			info.TTLMS <= 0 || info.LastFence != tc.token || h.TTLMS <= 0 || time.Since(h.Since) > time.Minute {
			t.Fatalf("%s --json: holder %+v ttl %d ms last %d; want token %d count %d", tc.name, h, info.TTLMS, info.LastFence, tc.token, tc.count)
		}
	}

	code, out, _ := dlock(t, "inspect", "free:1", "--redis", url)
	if code != 0 || !regexp.MustCompile(`(?m)^state\s+free$`).MatchString(out) {
		t.Fatalf("free lock: exit %d\n%s", code, out)
	}
}

func TestInspectPattern(t *testing.T) {
	url, c := lockServer(t)
	ctx := context.Background()
	var tokens []int64
	for _, name := range []string{"stock:old", "stock:mid", "stock:new", "order:1"} {
		l, err := c.Mutex(name).Acquire(ctx, dl.LeaseTime(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, l.Token())
		time.Sleep(5 * time.Millisecond) // distinct ages
	}
	code, out, stderr := dlock(t, "inspect", "--pattern", "stock:*", "--redis", url)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "NAME") || lines[4] != "3 held locks" {
		t.Fatalf("want a header, 3 locks and a count:\n%s", out)
	}
	for i, name := range []string{"stock:old", "stock:mid", "stock:new"} {
		f := strings.Fields(lines[i+1])
		if f[0] != name || f[1] != "mutex" || f[5] != strconv.FormatInt(tokens[i], 10) || !strings.Contains(lines[i+1], "cli-test") {
			t.Fatalf("line %d = %q, want %s (mutex, token %d, cli-test), oldest first", i+1, lines[i+1], name, tokens[i])
		}
	}

	code, out, _ = dlock(t, "inspect", "--pattern", "stock:*", "--limit", "1", "--json", "--redis", url)
	var infos []infoJSON
	if err := json.Unmarshal([]byte(out), &infos); code != 0 || err != nil {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if len(infos) != 1 || infos[0].Name != "stock:old" {
		t.Fatalf("--limit 1 --json = %+v, want only stock:old", infos)
	}
	code, out, _ = dlock(t, "inspect", "--pattern", "none:*", "--redis", url)
	if code != 0 || !strings.Contains(out, "no held locks match") {
		t.Fatalf("no match: exit %d\n%s", code, out)
	}
}

// Fields another shape adds to Info and Holder are printed without changes
// to the command.
func TestPrintTableGeneric(t *testing.T) {
	type waiter struct {
		ID       string
		Deadline time.Time
		Wait     time.Duration
		Mode     string // set in no row: no column
	}
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	_ = structTable(reflect.ValueOf([]waiter{{"abcd1234", now.Add(2 * time.Second), 1500 * time.Millisecond, ""}, {ID: "ef567890"}}), now).Write(&b)
	out := b.String()
	for _, want := range []string{"ID", "DEADLINE", "WAIT", "abcd1234", "2025-01-01T12:00:02.000Z (-2s ago)", "1.5s", "ef567890"} {
		if !strings.Contains(out, want) {
			t.Fatalf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "MODE") {
		t.Fatalf("a column no row sets is shown:\n%s", out)
	}

	// Fields another shape adds to dl.Info (a queue, readers, ...): a
	// non-empty slice of structs is printed as a table, an empty one not.
	info := dl.Info{Name: "x", Shape: "fair", Held: true}
	iv := reflect.ValueOf(&info).Elem()
	extra := ""
	for _, sf := range reflect.VisibleFields(iv.Type()) {
		fv := iv.FieldByIndex(sf.Index)
		if knownInfoFields[sf.Name] || !isStructSlice(fv) || fv.Type().Elem().Kind() != reflect.Struct {
			continue
		}
		elem := reflect.New(fv.Type().Elem()).Elem()
		for i := range elem.NumField() {
			if elem.Field(i).Kind() == reflect.String && elem.Type().Field(i).IsExported() {
				elem.Field(i).SetString("extra-row")
				extra = label(sf.Name)
				break
			}
		}
		if extra != "" {
			fv.Set(reflect.Append(fv, elem))
			break
		}
	}
	b.Reset()
	printInfo(&b, info, now)
	if extra != "" && (!strings.Contains(b.String(), extra+" (1):") || !strings.Contains(b.String(), "extra-row")) {
		t.Fatalf("extra field %q not printed:\n%s", extra, b.String())
	}
	b.Reset()
	printInfo(&b, dl.Info{Name: "y", Shape: "lock", Held: true}, now)
	if strings.Contains(b.String(), "(0):") {
		t.Fatalf("empty tables printed:\n%s", b.String())
	}
	if got := label("LastFence"); got != "last fence" {
		t.Fatalf("label(LastFence) = %q", got)
	}
	if got := label("TTL"); got != "ttl" {
		t.Fatalf("label(TTL) = %q", got)
	}
}

func TestInspectBadInput(t *testing.T) {
	url, _ := lockServer(t)
	for _, args := range [][]string{
		{"inspect"},
		{"inspect", "a", "b", "--redis", url},
		{"inspect", "a", "--pattern", "x*", "--redis", url},
		{"inspect", "--pattern", "x*", "--limit", "-1", "--redis", url},
		{"inspect", "a", "--redis", "not a url"},
		{"inspect", "", "--redis", url},
		{"inspect", "--prefix", "bad{", "--pattern", "x*", "--redis", url},
		{"inspect", "a", "--prefix", "bad{", "--redis", url},
		{"unlock", "a", "--redis", url},
		{"unlock", "--force", "--redis", url},
		{"unlock", "--force", "", "--redis", url},
		{"unlock", "--force", "a", "--yes", "--redis", "not a url"},
		{"unlock", "--force", "a", "--yes", "--prefix", "bad{", "--redis", url},
		{"inspect", "a", "--redis", url, "--nosuchflag"},
		{"unlock", "--force", "a", "--redis", url, "--nosuchflag"},
	} {
		code, _, stderr := dlock(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
		if !oneLineError(stderr) {
			t.Errorf("%v: want a one-line error, got %q", args, stderr)
		}
	}
}

// The shapes that keep more than one holder or a queue: a FairLock's
// waiter, an RWLock's readers, a Semaphore's permits.
func TestInspectShapes(t *testing.T) {
	url, c := lockServer(t)
	ctx := context.Background()
	inspect := func(name string) infoJSON {
		t.Helper()
		code, out, stderr := dlock(t, "inspect", name, "--json", "--redis", url)
		if code != 0 {
			t.Fatalf("inspect %s: exit %d: %s", name, code, stderr)
		}
		var info infoJSON
		if err := json.Unmarshal([]byte(out), &info); err != nil {
			t.Fatalf("inspect %s: %v\n%s", name, err, out)
		}
		return info
	}

	holder, err := c.FairLock("fair:1").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		l, err := c.FairLock("fair:1").Acquire(wctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		waited <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	var info infoJSON
	for info = inspect("fair:1"); len(info.Queue) == 0; info = inspect("fair:1") {
		if time.Now().After(deadline) {
			t.Fatalf("the waiter never showed in the queue: %+v", info)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(info.Holders) != 1 || info.Holders[0].Fence != holder.Token() || len(info.Queue) != 1 ||
		info.Queue[0].Label != "cli-test" || info.Queue[0].PID != os.Getpid() || info.Queue[0].DeadlineMS <= 0 {
		t.Fatalf("fair lock: %+v; want holder token %d and one waiter with a deadline", info, holder.Token())
	}
	code, out, _ := dlock(t, "inspect", "fair:1", "--redis", url)
	if code != 0 || !strings.Contains(out, "queue (1):") || !strings.Contains(out, "DEADLINE") {
		t.Fatalf("fair lock, for people: exit %d\n%s", code, out)
	}
	cancel()
	if err := <-waited; err == nil {
		t.Fatal("the cancelled waiter got the lock")
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	var readers []*dl.Lease
	for range 2 { // two owners: two holders
		l, err := c.RWLock("rw:1").ReadLock().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		readers = append(readers, l)
	}
	info = inspect("rw:1")
	if len(info.Holders) != 2 || info.Holders[0].Mode != "read" || info.Holders[1].Mode != "read" {
		t.Fatalf("rw lock with two readers: %+v", info)
	}

	permits, err := c.Semaphore("sem:1", 3).AcquireN(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	info = inspect("sem:1")
	if info.Permits != 3 || len(info.Holders) != 2 {
		t.Fatalf("semaphore with 2 of 3 permits taken: %+v", info)
	}
	for _, l := range append(readers, permits...) {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// infoJSON is inspect --json's documented output (snake_case keys,
// durations in ms), decoded without the library's types.
type infoJSON struct {
	Name      string `json:"name"`
	Shape     string `json:"shape"`
	Held      bool   `json:"held"`
	TTLMS     int64  `json:"ttl_ms"`
	LastFence int64  `json:"last_fence"`
	Holders   []struct {
		ID    string    `json:"id"`
		Host  string    `json:"host"`
		PID   int       `json:"pid"`
		Label string    `json:"label"`
		Since time.Time `json:"since"`
		Count int       `json:"count"`
		Fence int64     `json:"fence"`
		Mode  string    `json:"mode"`
		TTLMS int64     `json:"ttl_ms"`
	} `json:"holders"`
	Queue []struct {
		PID        int    `json:"pid"`
		Label      string `json:"label"`
		DeadlineMS int64  `json:"deadline_ms"`
	} `json:"queue"`
	Permits int `json:"permits"`
}

// inspect --json: snake_case keys like serve and seckill, no PascalCase
// key, and [] (never null) for no holders and no matching locks.
func TestInspectJSONKeys(t *testing.T) {
	url, c := lockServer(t)
	if _, err := c.Mutex("k:1").Acquire(context.Background(), dl.LeaseTime(time.Minute)); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := dlock(t, "inspect", "k:1", "--json", "--redis", url)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"name", "shape", "held", "holders", "ttl_ms", "last_fence", "queue", "permits"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("key %q missing:\n%s", k, out)
		}
	}
	if string(raw["queue"]) != "[]" {
		t.Errorf("queue = %s, want []", raw["queue"])
	}
	if m := regexp.MustCompile(`"[A-Z]\w*":`).FindString(out); m != "" {
		t.Errorf("PascalCase key %s:\n%s", m, out)
	}
	if !regexp.MustCompile(`(?m)^\s+"ttl_ms": \d+,$`).MatchString(out) {
		t.Errorf("ttl_ms is not a whole number of ms:\n%s", out)
	}

	for _, args := range [][]string{{"inspect", "free:1"}, {"inspect", "--pattern", "none:*"}} {
		code, out, stderr := dlock(t, append(args, "--json", "--redis", url)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if strings.Contains(out, "null") {
			t.Errorf("%v: null in the output:\n%s", args, out)
		}
	}
	_, out, _ = dlock(t, "inspect", "--pattern", "none:*", "--json", "--redis", url)
	if strings.TrimSpace(out) != "[]" {
		t.Errorf("no match --json = %q, want []", out)
	}
	_, out, _ = dlock(t, "inspect", "free:1", "--json", "--redis", url)
	if err := json.Unmarshal([]byte(out), &raw); err != nil || string(raw["holders"]) != "[]" || string(raw["held"]) != "false" {
		t.Errorf("free lock --json: holders %s held %s (%v):\n%s", raw["holders"], raw["held"], err, out)
	}
}

// The same bad input gives inspect and unlock the same exit code: 2 for
// bad input, 1 for a runtime failure (Redis unreachable).
func TestInspectUnlockExitCodes(t *testing.T) {
	url, _ := lockServer(t)
	down := "redis://127.0.0.1:1/0"
	for _, tc := range []struct {
		why  string
		code int
		tail []string
	}{
		{"invalid name", exitUsage, []string{"", "--redis", url}},
		{"bad URL", exitUsage, []string{"a", "--redis", "not a url"}},
		{"bad prefix", exitUsage, []string{"a", "--prefix", "bad{", "--redis", url}},
		{"unknown flag", exitUsage, []string{"a", "--redis", url, "--nosuch"}},
		{"redis down", exitError, []string{"a", "--redis", down}},
	} {
		for _, head := range [][]string{{"inspect"}, {"unlock", "--force", "--yes"}} {
			args := append(append([]string(nil), head...), tc.tail...)
			code, _, stderr := dlock(t, args...)
			if code != tc.code {
				t.Errorf("%s: %v: exit %d, want %d (stderr %q)", tc.why, args, code, tc.code, stderr)
			}
			if !oneLineError(stderr) {
				t.Errorf("%s: %v: want a one-line error, got %q", tc.why, args, stderr)
			}
		}
	}
}
