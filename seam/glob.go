package seam

import (
	"fmt"
	"strings"
)

// MatchGlob reports whether name matches pattern, a Redis glob (the semantics
// of Redis's stringmatchlen, case-sensitive, over bytes):
//
//   - '*' matches any run of bytes, '/' and ':' included, the empty one too;
//   - '?' matches one byte;
//   - "[abc]" one of the bytes listed, "[^abc]" one byte not listed, "[a-z]"
//     one byte in the range (either way round: "[z-a]" is "[a-z]"); in a
//     class, '\' makes the next byte a member; a class left open ends with
//     the pattern;
//   - '\' matches the byte after it literally ('\*', '\?', '\[', '\\'); a
//     '\' that ends the pattern matches '\';
//   - any other byte matches itself.
//
// The pattern must match the whole name; as on Redis, the empty name
// matches the empty pattern only (no lock name is empty). A range compares
// bytes as unsigned numbers (Redis compares C chars: the same for ASCII).
func MatchGlob(pattern, name string) bool {
	skip := false
	return match(pattern, name, &skip)
}

// match is MatchGlob; *skip is set once a '*' found no place for the rest of the
// pattern in any later part of the name, so that the '*'s before it need
// not try longer runs (none can succeed): it keeps the work polynomial.
func match(p, s string, skip *bool) bool {
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for ; len(s) > 0; s = s[1:] {
				if match(p[1:], s, skip) {
					return true
				}
				if *skip {
					return false
				}
			}
			*skip = true
			return false
		case '?':
			s = s[1:]
		case '[':
			var ok bool
			if p, ok = class(p[1:], s[0]); !ok {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		if len(p) > 0 {
			p = p[1:]
		}
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
		}
	}
	return len(p) == 0 && len(s) == 0
}

// class matches c against the class p starts, just after its '['; it
// returns p at the class's ']' ("" if the class is left open) and whether c
// is in the class.
func class(p string, c byte) (rest string, ok bool) {
	not := len(p) > 0 && p[0] == '^'
	if not {
		p = p[1:]
	}
	for len(p) > 0 && p[0] != ']' {
		switch {
		case p[0] == '\\' && len(p) >= 2:
			p = p[1:]
			ok = ok || p[0] == c
		case len(p) >= 3 && p[1] == '-':
			lo, hi := min(p[0], p[2]), max(p[0], p[2])
			ok = ok || lo <= c && c <= hi
			p = p[2:]
		default:
			ok = ok || p[0] == c
		}
		p = p[1:]
	}
	return p, ok != not
}

// CheckPattern returns pattern as List reads it ("" is "*"), or an error
// wrapping ErrInvalidArgument if it is longer than MaxNameLen.
func CheckPattern(pattern string) (string, error) {
	if len(pattern) > MaxNameLen {
		return "", fmt.Errorf("%w: pattern of %d bytes (want at most %d)", ErrInvalidArgument, len(pattern), MaxNameLen)
	}
	if pattern == "" {
		return "*", nil
	}
	return pattern, nil
}

// QuoteGlob returns s with the characters special to a glob ('*', '?',
// '[', ']', '\') escaped, so that the pattern matches s alone.
func QuoteGlob(s string) string {
	if !strings.ContainsAny(s, `*?[]\`) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
