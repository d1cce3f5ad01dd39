// Package errline turns an error into the one line the dlock command
// prints: "dlock: <op> <what> "<name/address>": <reason>", the cause said
// once. The errors it is given come from several layers (the command, the
// lock library, a client library), each of which may name the operation,
// the server or "dlock" again; Clean removes what a layer repeats without
// depending on any layer's exact wording.
package errline

import (
	"strings"
	"unicode"
)

// Prefix starts every error line of the command.
const Prefix = "dlock: "

// Line returns err as the command prints it: Prefix and Clean's text.
func Line(err error) string { return Prefix + Clean(err.Error()) }

// Clean returns msg on one line with what it repeats left out:
//
//   - every "dlock: " (the command's Prefix says it once, in front);
//   - a line break (a client library's message that lists every address it
//     dialled) becomes "; ";
//   - a ": "-separated part that is the first words of the part before it
//     ("verify redlock "x": verify: no quorum" → "verify redlock "x": no
//     quorum");
//   - a word that repeats the word before it ("Unlock: unlock mutex" →
//     "Unlock: mutex");
//   - empty parts, and a colon or spaces left dangling at the end
//     ("invalid URL scheme: " → "invalid URL scheme").
func Clean(msg string) string {
	msg = strings.ReplaceAll(msg, Prefix, "")
	msg = strings.NewReplacer("\r", "", "\n\t", "; ", "\n", "; ").Replace(strings.TrimSpace(msg))
	var clauses []string
	for _, c := range strings.Split(msg, "; ") {
		if c = cleanClause(c); c != "" {
			clauses = append(clauses, c)
		}
	}
	msg = dropRepeatedWords(strings.Join(clauses, "; "))
	return strings.TrimRightFunc(msg, func(r rune) bool { return r == ':' || r == ';' || unicode.IsSpace(r) })
}

// cleanClause drops the empty parts of one "; "-separated clause and
// those that repeat the part before them.
func cleanClause(c string) string {
	var parts []string
	for _, p := range strings.Split(c, ": ") {
		p = strings.TrimSpace(p)
		if p == "" || p == ":" {
			continue
		}
		if len(parts) > 0 && leads(p, parts[len(parts)-1]) {
			continue
		}
		parts = append(parts, p)
	}
	return strings.TrimRight(strings.Join(parts, ": "), ": ")
}

// leads reports whether the words of p are the first words of prev
// ("verify" of `verify redlock "x"`).
func leads(p, prev string) bool {
	pw, prevw := strings.Fields(p), strings.Fields(prev)
	if len(pw) == 0 || len(pw) > len(prevw) {
		return false
	}
	for i, w := range pw {
		if norm(w) != norm(prevw[i]) {
			return false
		}
	}
	return true
}

// dropRepeatedWords leaves out a word equal to the word before it (case
// and punctuation aside).
func dropRepeatedWords(s string) string {
	words := strings.Split(s, " ")
	out := words[:0]
	for i, w := range words {
		if i > 0 && norm(w) != "" && norm(w) == norm(words[i-1]) {
			continue
		}
		out = append(out, w)
	}
	return strings.Join(out, " ")
}

// norm is a word without case and the punctuation around it.
func norm(w string) string {
	return strings.ToLower(strings.TrimFunc(w, func(r rune) bool { return unicode.IsPunct(r) && r != '-' && r != '"' }))
}
