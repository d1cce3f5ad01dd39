package inventory

import (
	"fmt"

	"github.com/dlockgo/dlock"
	"github.com/redis/go-redis/v9"
)

// Names lists the strategies, in the order of the package documentation.
var Names = []string{"naive", "lock", "conditional", "optimistic", "fenced", "prededuct"}

// Deps are what the strategies use besides Options: every strategy needs
// Store; lock and fenced need Locks (or Lockers); prededuct needs Redis.
type Deps struct {
	Store Store
	Locks *dlock.Client
	// Lockers, when set, hands out the locks of lock and fenced instead of
	// Locks: a client of another lock service (etcd, ZooKeeper).
	Lockers Lockers
	Redis   redis.UniversalClient
}

// Lockers hands out a sku's lock by name, on any lock service.
type Lockers interface {
	Lock(name string) dlock.Locker
}

// lockers returns d.Lockers, else Locks; nil when neither is set.
func (d Deps) lockers() Lockers {
	if d.Lockers != nil {
		return d.Lockers
	}
	if d.Locks != nil {
		return redisLockers{d.Locks}
	}
	return nil
}

// redisLockers are a dlock Client's reentrant locks.
type redisLockers struct{ c *dlock.Client }

func (r redisLockers) Lock(name string) dlock.Locker { return r.c.Lock(name) }

// New returns the strategy called name (see Names).
func New(name string, d Deps, o Options) (Strategy, error) {
	switch name {
	case "naive":
		return NewNaive(d.Store, o)
	case "lock":
		return newLocked(d.Store, d.lockers(), o)
	case "conditional":
		return NewConditional(d.Store, o)
	case "optimistic":
		return NewOptimistic(d.Store, o)
	case "fenced":
		return newFenced(d.Store, d.lockers(), o)
	case "prededuct":
		return NewPrededuct(d.Store, d.Redis, o)
	}
	return nil, fmt.Errorf("%w: unknown strategy %q (want one of %v)", ErrInvalidInput, name, Names)
}
