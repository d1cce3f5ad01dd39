package etcdlock

import (
	"context"
	"errors"
	"strconv"
	"strings"
)

// opError names the operation and lock on an error, as dlock's own errors
// do: `dlock: <op> "<name>": <cause>`.
type opError struct {
	op, name string
	err      error
}

func (e *opError) Error() string {
	name := e.name
	if len(name) > 64 {
		name = strings.ToValidUTF8(name[:64], "") + "…"
	}
	return "dlock: " + e.op + " " + strconv.Quote(name) + ": " + strings.TrimPrefix(e.err.Error(), "dlock: ")
}

func (e *opError) Unwrap() error { return e.err }

func wrap(op, name string, err error) error {
	if _, ok := err.(*opError); ok {
		return err
	}
	return &opError{op: op, name: name, err: err}
}

// isCtxErr reports whether err is a context's end, as etcd's client returns
// it.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
