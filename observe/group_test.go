package observe_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlockgo/dlock/observe"
)

func TestDefaultGroup(t *testing.T) {
	for name, want := range map[string]string{
		"stock:1001":                             "stock",
		"stock":                                  "stock",
		"stock:":                                 "stock",
		"order:pay:9001":                         "order:pay",
		"lock:stock:{1001}":                      "lock:stock",
		"user:alice":                             "user:alice",
		"user:9f8e7d6c-0000":                     "user",
		"1001":                                   observe.NoGroup,
		":x":                                     observe.NoGroup,
		"a::b":                                   "a",
		"cart:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": "cart", // a long segment is an id
		"sku-1:x":                                observe.NoGroup,
		"job.daily:report":                       "job.daily:report",
		"stock:ä":                                "stock",
	} {
		if got := observe.DefaultGroup(name); got != want {
			t.Errorf("DefaultGroup(%q) = %q, want %q", name, got, want)
		}
	}
}

// Groups are bounded, valid UTF-8 and at most 64 bytes, cut at a
// character boundary.
func TestGroups(t *testing.T) {
	g := observe.NewGroups(func(name string) string { return name }, 2)
	if got := g.Of("a"); got != "a" {
		t.Fatalf("Of(a) = %q", got)
	}
	if got := g.Of("b\xff"); got != "b\uFFFD" {
		t.Fatalf("Of(b\\xff) = %q, want the invalid byte replaced", got)
	}
	if got := g.Of("c"); got != observe.OtherGroup {
		t.Fatalf("a third group: %q, want %q", got, observe.OtherGroup)
	}
	if got := g.Of("a"); got != "a" {
		t.Fatalf("a group seen before the limit: %q", got)
	}
	long := strings.Repeat("x", 63) + "ä" // 65 bytes, ä across the 64-byte cut
	if got := observe.CleanValue(long, 64); got != strings.Repeat("x", 63) {
		t.Fatalf("CleanValue cut %q", got)
	}
	// Invalid bytes become 3-byte U+FFFD: the cut comes after, so the
	// value stays within n.
	if got := observe.CleanValue(strings.Repeat("a\xff", 32), 64); len(got) > 64 || !utf8.ValidString(got) {
		t.Fatalf("CleanValue of invalid bytes: %d bytes, valid %v, want at most 64 valid", len(got), utf8.ValidString(got))
	}
	if got := observe.NewGroups(func(string) string { return "" }, 1).Of("n"); got != observe.NoGroup {
		t.Fatalf("empty group: %q, want %q", got, observe.NoGroup)
	}
}
