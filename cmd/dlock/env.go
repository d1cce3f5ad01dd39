package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/spf13/cobra"
)

// envFlags lists, for the flags of that name on any command, the
// environment variables that give their value when the flag is not on the
// command line; the first one set (non-empty) wins.
var envFlags = []struct {
	flag string
	vars []string
}{
	{"redis", []string{"DLOCK_REDIS_URL", "REDIS_URL"}},
	{"db", []string{"DLOCK_DB"}},
}

// envHelp says in the help of every flag that envFlags names where its
// value may come from. Call it once the command tree is built.
func envHelp(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, e := range envFlags {
			if f := c.Flags().Lookup(e.flag); f != nil && !strings.Contains(f.Usage, e.vars[0]) {
				f.Usage += fmt.Sprintf(" [env %s; the flag wins]", strings.Join(e.vars, ", then "))
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// flagsFromEnv sets each flag of c that envFlags names and the command
// line did not give from the environment (a root PersistentPreRunE).
func flagsFromEnv(c *cobra.Command) error {
	for _, e := range envFlags {
		f := c.Flags().Lookup(e.flag)
		if f == nil || f.Changed {
			continue
		}
		for _, v := range e.vars {
			val := os.Getenv(v)
			if val == "" {
				continue
			}
			if err := f.Value.Set(val); err != nil {
				return usagef("%s=%q (for --%s): %v", v, backend.Redact(val), e.flag, err)
			}
			break
		}
	}
	return nil
}

// flagSource says where the value of the flag name of c came from, for
// the line that names the server a command uses: "from --redis", "from
// $DLOCK_REDIS_URL" (the first variable of envFlags that is set, as
// flagsFromEnv read it), or "the default".
func flagSource(c *cobra.Command, name string) string {
	if f := c.Flags().Lookup(name); f != nil && f.Changed {
		return "from --" + name
	}
	for _, e := range envFlags {
		if e.flag != name {
			continue
		}
		for _, v := range e.vars {
			if os.Getenv(v) != "" {
				return "from $" + v
			}
		}
	}
	return "the default"
}
