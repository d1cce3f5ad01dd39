package dlockprom

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// OtherGroup is the group of every lock name whose group would exceed the
// limit of distinct groups (WithMaxGroups).
const OtherGroup = "_other"

// NoGroup is the group of a name whose first segment already looks like an id.
const NoGroup = "_"

// maxGroupLen caps a group label value, in bytes.
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

// groups maps names to group label values and keeps their number bounded:
// once max distinct groups were seen, every new one becomes OtherGroup.
type groups struct {
	fn  func(string) string
	max int

	mu   sync.RWMutex
	seen map[string]struct{}
}

func newGroups(fn func(string) string, max int) *groups {
	return &groups{fn: fn, max: max, seen: make(map[string]struct{})}
}

// of returns the group label value of name.
func (g *groups) of(name string) string {
	grp := clean(g.fn(name))
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

// clean makes s a short, valid UTF-8 label value (Prometheus rejects
// invalid UTF-8, and a lock name may hold any bytes).
func clean(s string) string {
	if s == "" {
		return NoGroup
	}
	if len(s) > maxGroupLen {
		s = s[:maxGroupLen]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "_")
	}
	return s
}
