package dlock

// Unit tests of the pure parts: no Redis is needed (or started) for them.

import (
	"testing"
	"time"
)

// TestKeySlot checks the Cluster hash slot against the values of the Redis
// Cluster specification and of CLUSTER KEYSLOT.
func TestKeySlot(t *testing.T) {
	for _, tc := range []struct {
		key  string
		slot int
	}{
		{"123456789", 0x31C3 % 16384}, // the specification's CRC16 check value
		{"foo", 12182},
		{"{user1000}.following", keySlot("user1000")},
		{"{user1000}.followers", keySlot("user1000")},
		{"foo{}{bar}", keySlot("foo{}{bar}")}, // empty first tag: the whole key
		{"foo{{bar}}zap", keySlot("{bar")},
		{"foo{bar}{zap}", keySlot("bar")},
		{"", 0},
	} {
		if got := keySlot(tc.key); got != tc.slot {
			t.Errorf("keySlot(%q) = %d, want %d", tc.key, got, tc.slot)
		}
	}
	for slot := range 16384 {
		if got := keySlot("dlock:fence:{" + slotTag(slot) + "}"); got != slot {
			t.Fatalf("the fence counter of slot %d is in slot %d", slot, got)
		}
	}
	c := &conn{prefix: DefaultPrefix, sub: &subscriber{}}
	for _, name := range []string{"a", "stock:1", "x{y}z", "a}b", "{", "order:123456"} {
		k, q := c.keys(name), c.queueKeys(name)
		if keySlot(k.fence) != keySlot(k.lock) || q.fence != k.fence || q.lock != k.lock || keySlot(q.queue) != keySlot(k.lock) {
			t.Errorf("%q: lock %q (slot %d), fence counter %q (slot %d), queue keys %+v", name, k.lock, keySlot(k.lock), k.fence, keySlot(k.fence), q)
		}
	}
}

func TestParseGrant(t *testing.T) {
	g, err := parseGrant([]int64{1, 42})
	if err != nil || !g.ok || g.fence != 42 {
		t.Fatalf("granted reply: %+v, %v", g, err)
	}
	g, err = parseGrant([]int64{0, 1500, 1})
	if err != nil || g.ok || g.pttl != 1500*time.Millisecond {
		t.Fatalf("refused reply: %+v, %v", g, err)
	}
	for _, bad := range [][]int64{nil, {}, {1}} {
		if _, err := parseGrant(bad); err == nil {
			t.Errorf("parseGrant(%v) accepted a short reply", bad)
		}
	}
}

func TestParseMeta(t *testing.T) {
	h := parseMeta("host-a|4242|1700000000123|replica-1")
	if h.Host != "host-a" || h.PID != 4242 || h.Label != "replica-1" || !h.Since.Equal(time.UnixMilli(1700000000123)) {
		t.Fatalf("parseMeta: %+v", h)
	}
	h = parseMeta("host|x") // short and malformed: what can be read, nothing invented
	if h.Host != "host" || h.PID != 0 || !h.Since.IsZero() || h.Label != "" {
		t.Fatalf("parseMeta of a short value: %+v", h)
	}
	if h := parseMeta("h|1|2|a|b"); h.Label != "a|b" {
		t.Fatalf("a label with '|' is cut: %q", h.Label)
	}
}

// TestParseInspect reads the normalized inspect reply every shape's
// script returns (lua/inspect_lib.lua); a short or mistyped one is an
// error, never a panic.
func TestParseInspect(t *testing.T) {
	good := []any{"mutex", int64(1500), int64(42), int64(0),
		int64(1), "0123456789abcdef0123456789abcdef", "h|9|1700000000000|lbl", int64(1), int64(41), "", int64(1500),
		int64(1), "owner1234567", "w|7|1700000000001|", "", int64(900)}
	info, err := parseInspect("x", good)
	if err != nil {
		t.Fatal(err)
	}
	if info.Shape != "mutex" || !info.Held || info.TTL != 1500*time.Millisecond || info.LastFence != 42 || len(info.Holders) != 1 || len(info.Queue) != 1 {
		t.Fatalf("parseInspect: %+v", info)
	}
	if h := info.Holders[0]; h.ID != "01234567" || h.Host != "h" || h.PID != 9 || h.Label != "lbl" || h.Fence != 41 || h.Count != 1 {
		t.Fatalf("holder: %+v", h)
	}
	if w := info.Queue[0]; w.ID != "owner123" || w.PID != 7 || w.Deadline != 900*time.Millisecond {
		t.Fatalf("waiter: %+v", w)
	}
	free, err := parseInspect("x", []any{"", int64(-2), int64(0), int64(0), int64(0), int64(0)})
	if err != nil || free.Held || free.TTL >= 0 || free.Shape != "" {
		t.Fatalf("a free lock: %+v %v", free, err)
	}
	for i := range good {
		if _, err := parseInspect("x", good[:i]); err == nil {
			t.Errorf("a reply cut at %d read without error", i)
		}
	}
	if _, err := parseInspect("x", []any{int64(1), "no", int64(0)}); err == nil {
		t.Error("a mistyped reply read without error")
	}
}

// Oldest is the earliest known Since of the holders; unknown ones do not
// count; none known is zero.
func TestInfoOldest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	readers := Info{Holders: []Holder{{Since: t0.Add(7 * time.Second)}, {}, {Since: t0.Add(2 * time.Second)}}}
	if got := readers.Oldest(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("Oldest = %v, want the earliest known holder's", got)
	}
	if got := (Info{Holders: []Holder{{}}}).Oldest(); !got.IsZero() {
		t.Errorf("no Since known: Oldest = %v, want zero", got)
	}
}
