package seam

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		yes     []string
		no      []string
	}{
		{"*", []string{"a", "stock:1", "order/7", "a/b:c", "*", `\`}, []string{""}},
		{"", []string{""}, []string{"a"}},
		{"stock:*", []string{"stock:1", "stock:", "stock:1/2:3"}, []string{"stocks:1", "order/7", "stock"}},
		{"*:*", []string{"stock:1", "a:b:c", ":"}, []string{"abc", "a/b"}},
		{"*/7", []string{"order/7", "order/x/7", "/7"}, []string{"order/77", "order:7"}},
		{"a*b", []string{"ab", "axxb", "a/b", "a:b", "abab"}, []string{"abc", "ba"}},
		{"a**b", []string{"ab", "a**b"}, []string{"a"}},
		{"*a", []string{"a", "ba", "aaa"}, []string{"ab"}},
		{"a*", []string{"a", "ab"}, []string{"ba"}},
		{"*?", []string{"a", "ab"}, []string{""}},
		{"?", []string{"a", "/", ":", "?", "\xff"}, []string{"", "ab"}},
		{"order:1?", []string{"order:12", "order:1/"}, []string{"order:1", "order:123"}},
		{"[abc]", []string{"a", "b", "c"}, []string{"d", "", "ab", "["}},
		{"[^abc]", []string{"d", "/", "^"}, []string{"a", "c", ""}},
		{"[a-c]x", []string{"ax", "bx", "cx"}, []string{"dx", "-x", "b"}},
		{"[c-a]", []string{"a", "b", "c"}, []string{"d"}},
		{"[^0-9]", []string{"a", ":"}, []string{"5"}},
		{"stock:[0-9]*", []string{"stock:1", "stock:12/x"}, []string{"stock:x", "stock:"}},
		{`[\]]`, []string{"]"}, []string{`\`, "["}},
		{`[\^a]`, []string{"^", "a"}, []string{"b"}},
		{`[\-]`, []string{"-"}, []string{"a"}},
		{"[/:]", []string{"/", ":"}, []string{"a"}},
		{"[]a]", nil, []string{"]a", "a", "]", "a]"}},    // "[]" is an empty class: it matches no byte
		{"[a-]", []string{"]", "^", "a"}, []string{"-"}}, // as on Redis: the range ']'-'a', the class left open
		{"[abc", []string{"a", "c"}, []string{"d", "["}}, // left open: ends with the pattern
		{"x[", nil, []string{"x", "x[", "xa"}},
		{`\*`, []string{"*"}, []string{"a", `\*`}},
		{`a\*b`, []string{"a*b"}, []string{"axb", "ab"}},
		{`\?`, []string{"?"}, []string{"x"}},
		{`\[1\]`, []string{"[1]"}, []string{"1"}},
		{`a\[1\]`, []string{"a[1]"}, []string{"a1"}},
		{"a[1]", []string{"a1"}, []string{"a[1]"}},
		{`\\`, []string{`\`}, []string{`\\`}},
		{`\`, []string{`\`}, []string{"a"}},
		{`a\`, []string{`a\`}, []string{"a"}},
		{`\a`, []string{"a"}, []string{`\a`}},
		{`stock\:1`, []string{"stock:1"}, []string{"stock\\:1"}},
	} {
		for _, name := range tc.yes {
			if !MatchGlob(tc.pattern, name) {
				t.Errorf("MatchGlob(%q, %q) = false, want true", tc.pattern, name)
			}
		}
		for _, name := range tc.no {
			if MatchGlob(tc.pattern, name) {
				t.Errorf("MatchGlob(%q, %q) = true, want false", tc.pattern, name)
			}
		}
	}
}

// A pattern of many stars that fails does so in polynomial time.
func TestMatchManyStars(t *testing.T) {
	pattern := strings.Repeat("*a", 500) + "b"
	if MatchGlob(pattern, strings.Repeat("a", MaxNameLen)) {
		t.Fatal("matched a name without b")
	}
}

// escape escapes the bytes special to Match.
func escape(s string) string {
	var b strings.Builder
	for i := range len(s) {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Every name matches "*" and itself escaped, and its escaped form matches
// no other name.
func TestMatchEveryName(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab:/*?[]^-\\.\x00\xff"
	for range 5000 {
		b := make([]byte, 1+r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		name := string(b)
		if !MatchGlob("*", name) {
			t.Fatalf("MatchGlob(*, %q) = false", name)
		}
		if !MatchGlob(escape(name), name) {
			t.Fatalf("MatchGlob(%q, %q) = false: the name escaped", escape(name), name)
		}
		other := name[:len(name)-1] + string(alphabet[r.IntN(len(alphabet))])
		if other != name && MatchGlob(escape(name), other) {
			t.Fatalf("MatchGlob(%q, %q) = true: another name", escape(name), other)
		}
		if MatchGlob(escape(name), name+"a") {
			t.Fatalf("MatchGlob(%q, %q) = true: a longer name", escape(name), name+"a")
		}
	}
}

func TestCheckPattern(t *testing.T) {
	if p, err := CheckPattern(""); p != "*" || err != nil {
		t.Errorf(`CheckPattern("") = %q, %v; want "*"`, p, err)
	}
	if p, err := CheckPattern("stock:*"); p != "stock:*" || err != nil {
		t.Errorf("CheckPattern(stock:*) = %q, %v", p, err)
	}
	long := strings.Repeat("*", MaxNameLen)
	if p, err := CheckPattern(long); p != long || err != nil {
		t.Errorf("CheckPattern(%d bytes) = %v", len(long), err)
	}
	if _, err := CheckPattern(long + "*"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("CheckPattern(%d bytes) = %v, want ErrInvalidArgument", len(long)+1, err)
	}
}

// QuoteGlob's pattern matches its string and nothing else it would match
// unquoted.
func TestQuoteGlob(t *testing.T) {
	for _, s := range []string{"plain", `a*b`, `a?[1]\c`, ""} {
		if !MatchGlob(QuoteGlob(s), s) {
			t.Errorf("MatchGlob(QuoteGlob(%q), %q) = false", s, s)
		}
	}
	if MatchGlob(QuoteGlob("a*b"), "axxb") || MatchGlob(QuoteGlob("a[1]"), "a1") {
		t.Error("a quoted pattern matches more than its string")
	}
}
