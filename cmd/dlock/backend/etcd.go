package backend

import (
	"context"
	"fmt"
)

func openEtcd(ctx context.Context, addr string) (*Backend, error) {
	return nil, fmt.Errorf("%w %q: not built in yet", ErrUnknown, Etcd)
}
