package inventory

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// ErrUnavailable: Redis or the database did not answer (connection refused
// or reset, a network timeout, a server still loading its data or without
// a master). The request was not completed and may be retried later; a
// server answers it with 503 and Retry-After.
var ErrUnavailable = errors.New("inventory: a backing service is unavailable")

// unavailable wraps err with ErrUnavailable when it says Redis or the
// database could not be reached; other errors are returned as they are.
func unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) || !isUnavailable(err) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// IsUnavailable reports whether err is ErrUnavailable or an error that
// says Redis or the database could not be reached.
func IsUnavailable(err error) bool { return errors.Is(err, ErrUnavailable) || isUnavailable(err) }

func isUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout),
		redis.IsLoadingError(err), redis.IsMasterDownError(err), redis.IsClusterDownError(err),
		redis.IsTryAgainError(err), redis.IsReadOnlyError(err):
		return true
	}
	return false
}
