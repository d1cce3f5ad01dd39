package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
)

// serviceFlags pick the lock service of a command and give its address:
// --backend, --redis (registered by each command its own way) and the
// address flag of every other service (backend.Services: --etcd, --zk).
type serviceFlags struct {
	backend string
	redis   string
	addrs   map[string]*string // by kind: the services' but Redis's
}

// registerAddrs registers the address flag of each service but Redis: for
// the operator commands (admin) with the address its own tools assume as
// the default, else with none (Open's embedded server).
func (f *serviceFlags) registerAddrs(c *cobra.Command, admin bool) {
	f.addrs = map[string]*string{}
	for _, s := range backend.Services {
		if s.Kind == backend.Redis {
			continue
		}
		def, help := "", s.Servers+"; default: "+s.Embedded
		if admin {
			def, help = s.Local, "with --backend "+s.Kind+": the "+s.Servers
		}
		f.addrs[s.Kind] = c.Flags().String(s.Flag, def, help)
	}
}

// registerBackend registers --backend.
func (f *serviceFlags) registerBackend(c *cobra.Command) {
	c.Flags().StringVar(&f.backend, "backend", backend.Redis, "lock service: "+strings.Join(backend.Kinds, ", "))
}

// addr returns the flag that gives the address of the service kind and
// its value ("" when the command registered no such flag: Open's
// embedded server); ok false when kind names no service.
func (f *serviceFlags) addr(kind string) (flag, addr string, ok bool) {
	for _, s := range backend.Services {
		switch {
		case s.Kind != kind:
			continue
		case kind == backend.Redis:
			addr = f.redis
		case f.addrs[kind] != nil:
			addr = *f.addrs[kind]
		}
		return s.Flag, addr, true
	}
	return "", "", false
}
