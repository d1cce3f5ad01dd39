package dlockotel

import (
	"strings"
	"sync"
	"unicode/utf8"
)

// OtherGroup is the dlock.lock.group of every lock name whose group would
// exceed the limit of distinct groups (WithMaxGroups).
const OtherGroup = "_other"

// NoGroup is the dlock.lock.group of a name whose group function returned
// "".
const NoGroup = "_"

// maxGroupLen caps a group value, in bytes.
const maxGroupLen = 64

// groups maps names to group values and keeps their number bounded: once
// max distinct groups were seen, every new one becomes OtherGroup.
type groups struct {
	fn  func(string) string
	max int

	mu   sync.RWMutex
	seen map[string]struct{}
}

func newGroups(fn func(string) string, max int) *groups {
	return &groups{fn: fn, max: max, seen: make(map[string]struct{})}
}

// of returns the group of name.
func (g *groups) of(name string) string {
	grp := cleanValue(g.fn(name), maxGroupLen)
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

// cleanValue makes s valid UTF-8 of at most n bytes (n 0: any length); OTel
// attribute strings must be UTF-8, and a lock name may hold any bytes.
func cleanValue(s string, n int) string {
	if n > 0 && len(s) > n {
		s = s[:n]
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}
