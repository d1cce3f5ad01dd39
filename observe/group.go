package observe

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// The group values every observer (dlockprom, dlockotel) gives a lock
// name: lock names can be unbounded (one per order id), so metrics and
// spans carry a bounded function of the name instead.
const (
	// OtherGroup is the group of every name whose group would exceed the
	// limit of distinct groups.
	OtherGroup = "_other"
	// NoGroup is the group of a name whose group function returned "" (for
	// DefaultGroup: whose first segment already looks like an id).
	NoGroup = "_"
	// DefaultMaxGroups is the default limit of distinct groups.
	DefaultMaxGroups = 100
)

// maxGroupLen caps a group value, in bytes.
const maxGroupLen = 64

// DefaultGroup maps a lock name to its group: the ':'-separated segments
// before the first one that looks like an id. A segment looks like an id when
// it is empty, contains a digit, is longer than 24 bytes, or contains anything
// but ASCII letters, '_', '-' and '.'. So "stock:1001" → "stock",
// "order:pay:9001" → "order:pay", "lock:stock:{1001}" → "lock:stock", and
// "1001" → NoGroup. Names made only of words ("user:alice") keep every
// segment; the limit of distinct groups still bounds them.
func DefaultGroup(name string) string {
	end := 0 // bytes of name taken so far
	for end < len(name) {
		seg := name[end:]
		if i := strings.IndexByte(seg, ':'); i >= 0 {
			seg = seg[:i]
		}
		if idLike(seg) {
			break
		}
		end += len(seg) + 1
	}
	if end == 0 {
		return NoGroup
	}
	return name[:min(end, len(name)+1)-1]
}

func idLike(seg string) bool {
	if seg == "" || len(seg) > 24 {
		return true
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_', c == '-', c == '.':
		default:
			return true
		}
	}
	return false
}

// Groups maps lock names to group values through a group function and
// keeps their number bounded: once max distinct groups were seen, every new
// one becomes OtherGroup. A value is valid UTF-8 of at most 64 bytes (what
// label values and attributes need; a lock name may hold any bytes), and ""
// becomes NoGroup. It is safe for concurrent use.
type Groups struct {
	fn  func(string) string
	max int

	mu   sync.RWMutex
	seen map[string]struct{}
}

// NewGroups returns the Groups of fn, at most max of them (max < 1:
// DefaultMaxGroups).
func NewGroups(fn func(name string) string, max int) *Groups {
	if max < 1 {
		max = DefaultMaxGroups
	}
	return &Groups{fn: fn, max: max, seen: make(map[string]struct{})}
}

// Of returns the group of name.
func (g *Groups) Of(name string) string {
	grp := CleanValue(g.fn(name), maxGroupLen)
	if grp == "" {
		grp = NoGroup
	}
	g.mu.RLock()
	_, ok := g.seen[grp]
	g.mu.RUnlock()
	if ok {
		return grp
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.seen[grp]; ok {
		return grp
	}
	if len(g.seen) >= g.max {
		return OtherGroup
	}
	g.seen[grp] = struct{}{}
	return grp
}

// CleanValue makes s valid UTF-8 (invalid bytes become U+FFFD) of at most
// n bytes (n 0: any length), cut at a character boundary: a lock name made
// fit for a label value or an attribute.
func CleanValue(s string, n int) string {
	if !utf8.ValidString(s) { // first: the replacements may make it longer
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if n > 0 && len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}
