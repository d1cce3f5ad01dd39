package drill

import (
	"context"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
)

// LockService hands out the lock clients of a drill's actors: a
// *backend.Backend (Redis, etcd or ZooKeeper) or a *Redis.
type LockService interface {
	NewClient(ctx context.Context, o backend.ClientOptions) (backend.Client, error)
}

// NewClient returns a lock client on r: a *Redis is a LockService.
func (r *Redis) NewClient(_ context.Context, o backend.ClientOptions) (backend.Client, error) {
	return backend.NewRedisClient(r.URL, o)
}

// serviceOf returns the backend kind of s and the address a child process
// opens it with (backend.Open).
func serviceOf(s LockService) (kind, addr string) {
	switch s := s.(type) {
	case *backend.Backend:
		return s.Kind, s.Addr
	case *Redis:
		return backend.Redis, s.URL
	}
	return "", ""
}

// kindOf returns the backend kind of s.
func kindOf(s LockService) string {
	kind, _ := serviceOf(s)
	return kind
}
