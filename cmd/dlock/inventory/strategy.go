package inventory

import (
	"fmt"

	"github.com/dlockgo/dlock"
	"github.com/redis/go-redis/v9"
)

// Names lists the strategies, in the order of the package documentation.
var Names = []string{"naive", "lock", "conditional", "optimistic", "fenced", "prededuct"}

// Deps are what the strategies use besides Options: every strategy needs
// Store; lock and fenced need Locks; prededuct needs Redis.
type Deps struct {
	Store Store
	Locks *dlock.Client
	Redis redis.UniversalClient
}

// New returns the strategy called name (see Names).
func New(name string, d Deps, o Options) (Strategy, error) {
	switch name {
	case "naive":
		return NewNaive(d.Store, o)
	case "lock":
		return NewLocked(d.Store, d.Locks, o)
	case "conditional":
		return NewConditional(d.Store, o)
	case "optimistic":
		return NewOptimistic(d.Store, o)
	case "fenced":
		return NewFenced(d.Store, d.Locks, o)
	case "prededuct":
		return NewPrededuct(d.Store, d.Redis, o)
	}
	return nil, fmt.Errorf("%w: unknown strategy %q (want one of %v)", ErrInvalidInput, name, Names)
}
