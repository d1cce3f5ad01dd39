package errline

import "testing"

// Clean leaves out what the layers of an error repeat, whatever their
// wording.
func TestErrlineClean(t *testing.T) {
	for in, want := range map[string]string{
		`dlock: verify redlock "x": verify: no quorum`:                        `verify redlock "x": no quorum`,
		`--redis "not-a-url": redis: invalid URL scheme: `:                    `--redis "not-a-url": redis: invalid URL scheme`,
		`resumes, Unlock: dlock: unlock mutex "a": lock lost`:                 `resumes, Unlock: mutex "a": lock lost`,
		"pgx: failed to connect\n\tdial 1: refused\n\tdial 2: refused":        "pgx: failed to connect; dial 1: refused; dial 2: refused",
		`hold mutex "a": lock lost (expired)`:                                 `hold mutex "a": lock lost (expired)`,
		`connect zookeeper "127.0.0.1:1": unreachable: dlock: dlock: timeout`: `connect zookeeper "127.0.0.1:1": unreachable: timeout`,
	} {
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
}
