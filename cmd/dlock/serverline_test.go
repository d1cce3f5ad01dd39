package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// inspect and unlock name the Redis they use on stderr, with where its URL
// came from, and keep stdout to the answer (JSON that parses under --json).
func TestAdminNamesTheServer(t *testing.T) {
	url, c := lockServer(t)
	if _, err := c.Mutex("named:1").Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		why, dlockURL, redisURL string
		flag                    []string
		want                    string
	}{
		{"flag", "", "", []string{"--redis", url}, "redis: " + url + " (from --redis)\n"},
		{"DLOCK_REDIS_URL", url, "redis://127.0.0.1:1/0", nil, "redis: " + url + " (from $DLOCK_REDIS_URL)\n"},
		{"REDIS_URL", "", url, nil, "redis: " + url + " (from $REDIS_URL)\n"},
	} {
		t.Run(tc.why, func(t *testing.T) {
			t.Setenv("DLOCK_REDIS_URL", tc.dlockURL)
			t.Setenv("REDIS_URL", tc.redisURL)
			for _, args := range [][]string{
				{"inspect", "named:1", "--json"},
				{"inspect", "--pattern", "named:*", "--json"},
				{"unlock", "--force", "free:1", "--yes", "--json"}, // not held: nothing removed
			} {
				code, out, stderr := dlock(t, append(args, tc.flag...)...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", args, code, stderr)
				}
				if !strings.HasPrefix(stderr, tc.want) {
					t.Errorf("%v: stderr %q, want it to start with %q", args, stderr, tc.want)
				}
				if strings.Contains(out, "redis:") || !json.Valid([]byte(out)) {
					t.Errorf("%v: stdout is not only JSON: %q", args, out)
				}
			}
			// Without --json the answer stays on stdout, the server on stderr.
			code, out, stderr := dlock(t, append([]string{"inspect", "named:1"}, tc.flag...)...)
			if code != 0 || stderr != tc.want || !strings.Contains(out, "state") || strings.Contains(out, "redis:") {
				t.Errorf("inspect: exit %d, stdout %q, stderr %q", code, out, stderr)
			}
		})
	}
}

// With no --redis and no variable set, the line says the default (the
// server itself is not contacted here: 6379 may be someone else's).
func TestServerLineDefault(t *testing.T) {
	t.Setenv("DLOCK_REDIS_URL", "")
	t.Setenv("REDIS_URL", "")
	for _, c := range []*cobra.Command{newInspectCmd(), newUnlockCmd(), newServeCmd()} {
		if err := c.ParseFlags(nil); err != nil {
			t.Fatal(err)
		}
		url := c.Flags().Lookup("redis").Value.String()
		if got, want := serverLine(url, flagSource(c, "redis")), "redis: redis://127.0.0.1:6379/0 (the default)"; got != want {
			t.Errorf("%s: %q, want %q", c.Name(), got, want)
		}
	}
	c := newInspectCmd()
	if err := c.ParseFlags([]string{"--redis", "redis://u:secret@127.0.0.1:7000/1"}); err != nil {
		t.Fatal(err)
	}
	if got, want := serverLine("redis://u:secret@127.0.0.1:7000/1", flagSource(c, "redis")), "redis: redis://u:xxxxx@127.0.0.1:7000/1 (from --redis)"; got != want {
		t.Errorf("a password in the URL: %q, want %q", got, want)
	}
}
