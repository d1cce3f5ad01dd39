package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The flag layer's checks, made once for every command before it does any
// work (the root's PersistentPreRunE): a number given on the command line
// must be positive unless its 0 means something (allowZero), and a file the
// command will write (outputFlag) must be writable. Bad input: exit 2.

// Annotations on flags (pflag's), read by checkFlags and the tests.
const (
	// zeroMeans marks a number flag whose 0 has a documented meaning (its
	// value says which); a negative value is refused still.
	zeroMeans = "dlock/zero-means"
	// outputPath marks a flag naming a file the command writes.
	outputPath = "dlock/output-path"
)

// allowZero lets the number flag name of c take 0, which means meaning.
func allowZero(c *cobra.Command, name, meaning string) {
	if err := c.Flags().SetAnnotation(name, zeroMeans, []string{meaning}); err != nil {
		panic(err) // a flag the command does not have: a bug of the command
	}
}

// outputFlag marks the flag name of c as a file the command writes.
func outputFlag(c *cobra.Command, name string) {
	if err := c.Flags().SetAnnotation(name, outputPath, []string{"true"}); err != nil {
		panic(err)
	}
}

// numberFlag reports whether f takes a number (an int, uint, float or
// duration of any size).
func numberFlag(f *pflag.Flag) bool {
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64", "duration":
		return true
	}
	return false
}

// sign returns -1, 0 or 1 for the value of a number flag.
func sign(f *pflag.Flag) (int, error) {
	v := f.Value.String()
	var x float64
	switch f.Value.Type() {
	case "duration":
		d, err := time.ParseDuration(v)
		if err != nil {
			return 0, err
		}
		x = float64(d)
	default:
		var err error
		if x, err = strconv.ParseFloat(v, 64); err != nil {
			return 0, err
		}
	}
	switch {
	case x < 0:
		return -1, nil
	case x == 0:
		return 0, nil
	}
	return 1, nil
}

// checkFlags checks the flags of c given on the command line.
func checkFlags(c *cobra.Command) error {
	var err error
	c.Flags().Visit(func(f *pflag.Flag) {
		if err == nil {
			err = checkFlag(f)
		}
	})
	return err
}

func checkFlag(f *pflag.Flag) error {
	if numberFlag(f) {
		s, err := sign(f)
		if err != nil {
			return usagef("--%s %s: %v", f.Name, f.Value, err)
		}
		zero := f.Annotations[zeroMeans]
		switch {
		case s < 0 && len(zero) > 0:
			return usagef("--%s %s: want >= 0 (0: %s)", f.Name, f.Value, zero[0])
		case s < 0 || s == 0 && len(zero) == 0:
			return usagef("--%s %s: want > 0", f.Name, f.Value)
		}
	}
	if len(f.Annotations[outputPath]) > 0 {
		if err := writable(f.Value.String()); err != nil {
			return usagef("--%s %q: %v", f.Name, f.Value, err)
		}
	}
	return nil
}

// writable checks, without leaving anything behind, that a file can be
// written at path: its directory exists and takes a new file, and path is
// not a directory.
func writable(path string) error {
	if path == "" {
		return errors.New("no file named")
	}
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return errors.New("is a directory")
		}
		fh, err := os.OpenFile(path, os.O_WRONLY, 0) // no O_TRUNC: the file is left as it is
		if err != nil {
			return fmt.Errorf("cannot write it: %v", errors.Unwrap(err))
		}
		return fh.Close()
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("no directory %s", dir)
	case err != nil:
		return err
	case !st.IsDir():
		return fmt.Errorf("%s is not a directory", dir)
	}
	probe, err := os.CreateTemp(dir, ".dlock-write-check-*")
	if err != nil {
		return fmt.Errorf("cannot write in %s", dir)
	}
	name := probe.Name()
	probe.Close()
	return os.Remove(name)
}
