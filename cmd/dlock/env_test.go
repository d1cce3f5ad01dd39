package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	code, out, stderr := dlock(t, "--version")
	if code != 0 || !regexp.MustCompile(`^dlock version \S+`).MatchString(out) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	old := version
	t.Cleanup(func() { version = old })
	version = "v9.8.7" // what -ldflags "-X main.version=v9.8.7" sets
	if _, out, _ := dlock(t, "--version"); out != "dlock version v9.8.7\n" {
		t.Fatalf("with the version set: %q", out)
	}
}

// --redis comes from DLOCK_REDIS_URL, then REDIS_URL, when not given; the
// flag wins over both.
func TestEnvRedis(t *testing.T) {
	url, c := lockServer(t)
	if _, err := c.Mutex("env:1").Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	const down = "redis://127.0.0.1:1/0"
	held := regexp.MustCompile(`(?m)^state\s+held$`)
	for _, tc := range []struct {
		why         string
		dlockURL    string
		redisURL    string
		flag        []string
		code        int
		wantHeldOut bool
	}{
		{"DLOCK_REDIS_URL", url, "", nil, 0, true},
		{"REDIS_URL", "", url, nil, 0, true},
		{"DLOCK_REDIS_URL before REDIS_URL", url, down, nil, 0, true},
		{"the flag wins", down, down, []string{"--redis", url}, 0, true},
		{"the flag wins, even when down", url, url, []string{"--redis", down}, exitError, false},
		{"a bad URL in the environment", "not a url", "", nil, exitUsage, false},
	} {
		t.Run(tc.why, func(t *testing.T) {
			t.Setenv("DLOCK_REDIS_URL", tc.dlockURL)
			t.Setenv("REDIS_URL", tc.redisURL)
			code, out, stderr := dlock(t, append([]string{"inspect", "env:1"}, tc.flag...)...)
			if code != tc.code || held.MatchString(out) != tc.wantHeldOut {
				t.Fatalf("exit %d (want %d)\nstdout %s\nstderr %s", code, tc.code, out, stderr)
			}
		})
	}
}

// --db comes from DLOCK_DB when not given: a bad one is refused as if it
// were on the command line.
func TestEnvDB(t *testing.T) {
	t.Setenv("DLOCK_DB", "mysql://nope")
	code, _, stderr := dlock(t, "seckill", "--buyers", "1", "--stock", "1")
	if code != exitUsage || !strings.Contains(stderr, "mysql") {
		t.Fatalf("DLOCK_DB=mysql://nope: exit %d, stderr %q", code, stderr)
	}
}

// Every --redis and --db flag says in its help where else its value comes
// from.
func TestEnvHelp(t *testing.T) {
	n := 0
	stack := newRoot().Commands()
	for len(stack) > 0 {
		c := stack[0]
		stack = append(stack[1:], c.Commands()...)
		for _, name := range []string{"redis", "db"} {
			f := c.Flags().Lookup(name)
			if f == nil {
				continue
			}
			n++
			want := "DLOCK_DB"
			if name == "redis" {
				want = "DLOCK_REDIS_URL, then REDIS_URL"
			}
			if !strings.Contains(f.Usage, want) {
				t.Errorf("%s --%s: help %q does not name %s", c.CommandPath(), name, f.Usage, want)
			}
		}
	}
	if n < 5 {
		t.Fatalf("found %d --redis/--db flags; the walk missed commands", n)
	}
}
