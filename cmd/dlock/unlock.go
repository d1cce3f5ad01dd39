package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"

	"github.com/spf13/cobra"

	dl "github.com/dlockgo/dlock" // dl: "dlock" is taken by the tests' helper
)

// removalJSON is unlock --json's object: what was held ("info", as inspect
// --json shows it) and the keys removed ("keys").
type removalJSON struct {
	Info dl.Info
	Keys []string
}

// errAborted: the operator did not confirm.
var errAborted = errors.New("aborted: nothing removed")

func newUnlockCmd() *cobra.Command {
	var f adminFlags
	var force, yes bool
	c := &cobra.Command{
		Use:   "unlock --force NAME",
		Short: "Remove a lock whoever holds it (operators only)",
		Long: "unlock --force NAME removes a held lock of any shape: its key and its queue, reader and permit\n" +
			"keys, but not its fence counter, so fencing tokens keep increasing. It wakes every waiter.\n" +
			"The holder is not told: it finds out at its next renewal, check or unlock (ErrLockLost) and\n" +
			"may run on meanwhile; remove only the lock of a holder that is gone or stuck.\n\n" +
			"It shows the holder and asks for confirmation unless --yes is given.\n\n" + unlockExitCodes,
		Example: "  dlock inspect stock:1001          # who holds it, since when\n" +
			"  dlock unlock --force stock:1001\n" +
			"  dlock unlock --force stock:1001 --yes --json",
		RunE: func(c *cobra.Command, args []string) error {
			switch {
			case !force:
				return usagef("unlock: only --force is supported: a lock is released by its holder (Lease.Unlock); --force removes it as an operator")
			case len(args) != 1:
				return usagef("unlock: give one lock NAME (got %d)", len(args))
			}
			if kind, err := f.kind(c); err != nil {
				return err
			} else if kind != backend.Redis {
				return usagef("unlock --force is Redis-only: on %s a lock lives as long as its holder's session (it ends when the holder's session expires or is closed)", kind)
			}
			name := args[0]
			client, done, err := f.open(c)
			if err != nil {
				return err
			}
			defer done()
			msgs := c.OutOrStdout()
			if f.json {
				msgs = c.ErrOrStderr()
			}
			info, err := client.Inspect(c.Context(), name)
			switch {
			case errors.Is(err, dl.ErrWrongType):
				fmt.Fprintf(msgs, "lock %q: %v\n", name, err)
			case errors.Is(err, dl.ErrInvalidName):
				return usageError{err}
			case err != nil:
				return err
			case !info.Held:
				fmt.Fprintf(msgs, "lock %q is not held: nothing to unlock\n", name)
				if f.json {
					return writeJSON(c.OutOrStdout(), removalJSON{Info: info, Keys: []string{}})
				}
				return nil
			default:
				printInfo(msgs, info, time.Now())
			}
			if !yes {
				ok, err := confirm(c.InOrStdin(), c.ErrOrStderr(), fmt.Sprintf("Force-unlock %q? Its holder will lose it. [y/N] ", name))
				if err != nil {
					return err
				}
				if !ok {
					return errAborted
				}
			}
			r, err := client.ForceUnlock(c.Context(), name)
			if err != nil {
				return err
			}
			if f.json {
				return writeJSON(c.OutOrStdout(), removalJSON{Info: r.Info, Keys: r.Keys})
			}
			printRemoval(msgs, r)
			return nil
		},
	}
	f.register(c, true)
	c.Flags().BoolVar(&force, "force", false, "remove the lock whoever holds it (required)")
	c.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return c
}

// confirm asks question on w and reads one answer line from r: true for
// "y" or "yes". End of input is a no.
func confirm(r io.Reader, w io.Writer, question string) (bool, error) {
	fmt.Fprint(w, question)
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	if errors.Is(err, io.EOF) && line == "" {
		fmt.Fprintln(w)
	}
	return false, nil
}

func printRemoval(w io.Writer, r dl.Removal) {
	if len(r.Keys) == 0 {
		fmt.Fprintf(w, "\nnothing removed: %q was freed meanwhile\n", r.Info.Name)
		return
	}
	fmt.Fprintf(w, "\nremoved %d key(s):\n", len(r.Keys))
	for _, k := range r.Keys {
		fmt.Fprintf(w, "  %s\n", k)
	}
	fmt.Fprintln(w, "kept the fence counter; woke every waiter")
}
