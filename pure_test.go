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
	if keySlot("dlock:{a}") != keySlot("dlock:{a}:fence") {
		t.Error("a lock and its fence counter are in different slots")
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

func TestSplitMutexValue(t *testing.T) {
	tok, f, meta, ok := splitMutexValue("abc|17|h|1|2|l")
	if !ok || tok != "abc" || f != 17 || meta != "h|1|2|l" {
		t.Fatalf("split: %q %d %q %v", tok, f, meta, ok)
	}
	for _, bad := range []string{"", "abc", "abc|x|m"} {
		if _, _, _, ok := splitMutexValue(bad); ok {
			t.Errorf("splitMutexValue(%q) accepted a malformed value", bad)
		}
	}
}

func TestQueueWaiter(t *testing.T) {
	w, ok := queueWaiter("op1|owner123456789|30000|client|h|9|1700000000000|lbl", time.Second)
	if !ok || w.ID != "owner123" || w.Host != "h" || w.PID != 9 || w.Label != "lbl" || w.Deadline != time.Second {
		t.Fatalf("queueWaiter: %+v %v", w, ok)
	}
	if _, ok := queueWaiter("op|owner|1|c|m", 0); ok {
		t.Error("a waiter past its deadline is listed")
	}
	if _, ok := queueWaiter(42, time.Second); ok {
		t.Error("a non-string member is listed")
	}
}
