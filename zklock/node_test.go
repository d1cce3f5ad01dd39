package zklock

import (
	"fmt"
	"slices"
	"testing"
)

// TestParseMember: a node's name gives its kind and sequence; anything
// else is not a member.
func TestParseMember(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
		kind byte
		seq  int64
	}{
		{"w-0123456789abcdef-0000000042", true, 'w', 42},
		{"r-ffffffffffffffff-2147483647", true, 'r', 2147483647},
		{"s-0123456789012345-0000000000", true, 's', 0},
		{"w-0123456789abcdef-", false, 0, 0},
		{"w-01234567890123456789", false, 0, 0},
		{"w_0123456789abcdef-0000000001", false, 0, 0},
		{"lock-0000000001", false, 0, 0},
		{"", false, 0, 0},
	} {
		m, ok := parseMember(tc.name)
		if ok != tc.ok || ok && (m.kind != tc.kind || m.seq != tc.seq || m.name != tc.name) {
			t.Errorf("parseMember(%q) = %+v, %v; want kind %c seq %d, %v", tc.name, m, ok, tc.kind, tc.seq, tc.ok)
		}
	}
}

// TestAdmitted: who holds the lock in a listing, in any order, and what a
// waiter watches.
func TestAdmitted(t *testing.T) {
	c := &Client{live: map[string][]*node{}}
	const a, b, x = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "xxxxxxxxxxxxxxxx"
	w := func(att string, seq string) string { return "w-" + att + "-" + seq }
	r := func(att string, seq string) string { return "r-" + att + "-" + seq }
	s := func(att string, seq string) string { return "s-" + att + "-" + seq }
	d := func(att string, seq string) string { return "d-" + att + "-" + seq }
	for _, tc := range []struct {
		what     string
		req      request
		me       string
		children []string
		want     place
	}{
		{"writer alone", request{kind: kindWrite}, w(x, "0000000005"), []string{w(x, "0000000005")}, place{found: true, ok: true}},
		{"writer second", request{kind: kindWrite}, w(x, "0000000005"), []string{w(x, "0000000005"), w(a, "0000000003"), r(b, "0000000004")},
			place{found: true, watch: r(b, "0000000004")}},
		{"writer gone", request{kind: kindWrite}, w(x, "0000000005"), []string{w(a, "0000000003")}, place{watch: w(a, "0000000003")}},
		{"reader behind readers", request{kind: kindRead}, r(x, "0000000009"), []string{r(a, "0000000001"), r(x, "0000000009"), r(b, "0000000002"), w(b, "0000000010")},
			place{found: true, ok: true}},
		{"reader behind a writer", request{kind: kindRead}, r(x, "0000000009"), []string{r(a, "0000000001"), w(a, "0000000002"), w(b, "0000000004"), r(x, "0000000009")},
			place{found: true, watch: w(b, "0000000004")}},
		{"permit 2 of 2", request{kind: kindPermit, permits: 2}, s(x, "0000000007"), []string{s(a, "0000000001"), s(x, "0000000007")},
			place{found: true, ok: true}},
		{"permit 3 of 2", request{kind: kindPermit, permits: 2}, s(x, "0000000007"), []string{s(b, "0000000003"), s(a, "0000000001"), s(x, "0000000007")},
			place{found: true}},
		{"a downgrade holds at once", request{kind: kindRead}, d(x, "0000000009"), []string{w(a, "0000000001"), w(b, "0000000004"), d(x, "0000000009")},
			place{found: true, ok: true}},
		{"a writer waits for a downgrade after it", request{kind: kindWrite}, w(x, "0000000004"), []string{d(a, "0000000009"), w(x, "0000000004")},
			place{found: true, watch: d(a, "0000000009")}},
		{"a writer waits for the nearest before it first", request{kind: kindWrite}, w(x, "0000000004"), []string{w(a, "0000000001"), d(a, "0000000009"), w(x, "0000000004")},
			place{found: true, watch: w(a, "0000000001")}},
		{"a reader does not wait for a downgrade", request{kind: kindRead}, r(x, "0000000004"), []string{d(a, "0000000002"), r(x, "0000000004")},
			place{found: true, ok: true}},
		{"a twin blocks nobody", request{kind: kindWrite}, w(x, "0000000005"), []string{w(x, "0000000002"), w(x, "0000000005")},
			place{found: true, ok: true, twins: []string{w(x, "0000000002")}}},
	} {
		got := tc.req.admitted(c, "/d", tc.me, x, tc.children)
		if got.found != tc.want.found || got.ok != tc.want.ok || got.watch != tc.want.watch || len(got.twins) != len(tc.want.twins) {
			t.Errorf("%s: %+v, want %+v", tc.what, got, tc.want)
		}
	}
}

// BenchmarkAdmitted: one look's reading of a hot lock's listing (64 nodes,
// the waiter last), for a writer and a reader.
func BenchmarkAdmitted(b *testing.B) {
	c := &Client{live: map[string][]*node{}}
	children := make([]string, 64)
	for i := range children {
		children[i] = "w-" + newAttempt() + "-" + fmt.Sprintf("%010d", i)
	}
	for _, k := range []byte{kindWrite, kindRead} {
		me := string(k) + "-" + newAttempt() + "-" + fmt.Sprintf("%010d", 99)
		ch := append(slices.Clone(children), me)
		r := &request{kind: k, owner: "o"}
		b.Run(string(k), func(b *testing.B) {
			for b.Loop() {
				if p := r.admitted(c, "/d", me, me[2:18], ch); p.ok || !p.found {
					b.Fatal(p)
				}
			}
		})
	}
}
