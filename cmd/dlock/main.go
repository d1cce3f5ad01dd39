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

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dlockgo/dlock/cmd/dlock/errline"
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

func main() { os.Exit(runMain()) }

// runMain is the command as a process: the client libraries' own loggers
// silenced, SIGINT and SIGTERM cancelling the run, os.Args on the standard
// streams. (A test binary acting as the command runs it too: see TestMain.)
func runMain() int {
	quietLibraries()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, os.Args[1:], os.Stdout, os.Stderr)
}

// quietLibraries silences go-redis's logger, the one global the command
// sets: go-redis logs every failed dial and Sentinel switch through it on
// stderr (four pool lines before the command's own error when Redis is
// down), where the command says what went wrong once, in its error line.
// etcd's client is given a no-op zap logger and zklock discards
// go-zookeeper's messages (cmd/dlock/backend).
func quietLibraries() { redis.SetLogger(quietLogger{}) }

// quietLogger discards go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	return runErr(root.ExecuteContext(ctx), stderr)
}

// runErr prints err, if any, on stderr and returns the exit code.
func runErr(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	// One line, whatever the error, the cause said once (errline.Clean): a
	// client library's multi-line message (pgx lists every address it
	// dialled) is joined with "; ".
	fmt.Fprintln(stderr, errline.Line(err))
	var ue usageError
	if errors.As(err, &ue) || strings.HasPrefix(err.Error(), "unknown command") {
		return exitUsage
	}
	return exitError
}

// flagError words a value the flag cannot take as the command's other
// errors: `--workers "many": want a whole number`, not pflag's `invalid
// argument "many" for "--workers" flag: strconv.ParseInt: parsing "many":
// invalid syntax`.
func flagError(err error) error {
	var ive *pflag.InvalidValueError
	if !errors.As(err, &ive) {
		return err
	}
	f := ive.GetFlag()
	want := "a value of type " + f.Value.Type()
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64":
		want = "a whole number"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		want = "a whole number, 0 or more"
	case "float32", "float64":
		want = "a number"
	case "duration":
		want = "a duration such as 500ms, 2s or 1m30s"
	case "bool":
		want = "true or false"
	}
	return fmt.Errorf("--%s %q: want %s", f.Name, ive.GetValue(), want)
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
			if err := checkFlags(c); err != nil {
				return err
			}
			return flagsFromEnv(c)
		},
	}
	root.SetVersionTemplate("dlock version {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{flagError(err)} })
	// Subcommands, one file each.
	root.AddCommand(newSeckillCmd(), newDrillCmd(), newServeCmd())
	root.AddCommand(newInspectCmd(), newUnlockCmd(), newTopCmd())
	envHelp(root)
	return root
}
