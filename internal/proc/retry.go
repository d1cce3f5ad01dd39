package proc

import "errors"

// Retry calls start up to attempts times while it fails with ErrAddrInUse
// (a port handed out as free was taken by someone else before the server
// bound it; start is expected to pick new ports), and returns its last
// result.
func Retry[T any](attempts int, start func() (T, error)) (T, error) {
	for i := 1; ; i++ {
		v, err := start()
		if err == nil || i >= attempts || !errors.Is(err, ErrAddrInUse) {
			return v, err
		}
	}
}
