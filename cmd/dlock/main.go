// Command dlock runs the flash sale and the failure drills of dlock against
// an embedded default or your own servers, serves the shop over HTTP, and
// inspects locks.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed (e.g. Redis down)
	exitUsage = 2 // bad flags, arguments or input
)

// usageError marks an error caused by the command line: exit code 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usagef returns a usageError.
func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	// One line, whatever the error: a client library's multi-line message
	// (pgx lists every address it dialled) is joined with "; ".
	msg := strings.TrimPrefix(err.Error(), "dlock: ")
	msg = strings.NewReplacer("\n\t", "; ", "\n", "; ").Replace(strings.TrimSpace(msg))
	fmt.Fprintln(stderr, "dlock:", msg)
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		return exitUsage
	}
	return exitError
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "dlock",
		Short: "Distributed locks that tell you when you lost them: flash sale, drills, inspection",
		Long: `Distributed locks that tell you when you lost them: flash sale, drills, inspection.

Environment: a --redis flag not given on the command line takes DLOCK_REDIS_URL, then REDIS_URL;
a --db flag takes DLOCK_DB. A flag given on the command line always wins.

Exit codes: 0 done; 1 the command ran and failed (e.g. Redis down); 2 bad flags, arguments or input.`,
		Version:       commandVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			return flagsFromEnv(c)
		},
	}
	root.SetVersionTemplate("dlock version {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// Subcommands, one file each.
	root.AddCommand(newSeckillCmd(), newDrillCmd(), newServeCmd())
	root.AddCommand(newInspectCmd(), newUnlockCmd())
	envHelp(root)
	return root
}
