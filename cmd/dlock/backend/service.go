package backend

import (
	"context"
	"fmt"
	"strings"
)

// Service is one lock service the command runs on: its name, the flag
// that gives its address, and how Open reads and opens that address. A
// backend's file declares its Service; Services lists them.
type Service struct {
	Kind string // Redis, Etcd, ZooKeeper
	// Flag is the name of the commands' flag that gives the address; it
	// is also a name --backend takes ("zk").
	Flag string
	// Servers says what the address names, Embedded what Open starts
	// when none is given, and Local is the address the service's own tools
	// assume (etcdctl's, zkCli.sh's): the help and the default of the
	// flags. The Redis flags are the commands' own (a URL, --cluster).
	Servers, Embedded, Local string
	// Prefix is where the service's library keeps its locks by default.
	Prefix string
	open   func(ctx context.Context, addr string) (*Backend, error)
	check  func(addr string) error
}

// Services are the lock services Open knows, in the order the tables
// show them.
var Services = []Service{redisService, etcdService, zooKeeperService}

// Kinds lists the Services' kinds, in their order.
var Kinds = kinds()

func kinds() []string {
	ks := make([]string, len(Services))
	for i, s := range Services {
		ks[i] = s.Kind
	}
	return ks
}

// Lookup returns the service kind names (its Kind or its Flag, in any
// case; "" is Redis), or an error wrapping ErrUnknown.
func Lookup(kind string) (Service, error) {
	if kind == "" {
		kind = Redis
	}
	for _, s := range Services {
		if strings.EqualFold(kind, s.Kind) || strings.EqualFold(kind, s.Flag) {
			return s, nil
		}
	}
	return Service{}, fmt.Errorf("%w %q: want one of %s", ErrUnknown, kind, strings.Join(Kinds, ", "))
}
