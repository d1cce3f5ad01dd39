package suite

import (
	"fmt"
	"slices"
	"time"

	"github.com/dlockgo/dlock/bench/internal/libs"
)

type kind int

const (
	contended kind = iota // workers loop acquire → section → release
	holds                 // many locks held at once, kept by auto-renewal
)

// Scenario is one table.
type Scenario struct {
	ID      string
	Title   string
	kind    kind
	Workers int
	Clients int           // separate client objects; workers share them round-robin
	Work    time.Duration // critical section
	Nodes   int           // redis-server processes used
	Note    string        // printed under the title
	Entries []libs.Entry
}

func (s Scenario) usesEtcd() bool {
	return slices.ContainsFunc(s.Entries, func(e libs.Entry) bool { return e.Client == "etcd" })
}

// ScenarioIDs lists the scenarios in the order they run.
func ScenarioIDs() []string {
	var ids []string
	for _, s := range scenarios(Defaults()) {
		ids = append(ids, s.ID)
	}
	return ids
}

// perClient notes how the per-worker-client scenarios are built.
const perClient = "Each worker has its own client object with its own connection pool (and, for dlock, its own pub/sub " +
	"connection; for rueidislock its own Locker; for etcd its own clientv3.Client), all in one process: separate " +
	"processes would add no Redis traffic, but would not share the Go runtime."

// holdEntries are the long-holds rows, their settings as they apply there.
func holdEntries() []libs.Entry {
	set := func(e libs.Entry, s string) libs.Entry { e.Setting = s; return e }
	d := libs.Dlock()
	for i := range d {
		d[i] = set(d[i], "watchdog")
	}
	r := libs.Rueidislock()
	return slices.Concat(d, []libs.Entry{
		set(libs.Redsync()[0], "Extend from a goroutine per lock"),
		set(libs.Redislock()[0], "Refresh from a goroutine per lock"),
		set(r[0], "own timers, NoLoopTracking off (default)"),
		set(r[1], "own timers, NoLoopTracking on"),
	})
}

func scenarios(c Config) []Scenario {
	single := slices.Concat(libs.Dlock(), libs.Redsync(), libs.Redislock(), libs.Rueidislock())
	hot := slices.Concat(single, libs.Etcd())
	w := c.Workers
	return []Scenario{
		{ID: "uncontended", Title: "Uncontended acquire+release, 1 worker", kind: contended, Workers: 1, Clients: 1, Nodes: 1,
			Entries: slices.Concat(libs.Floors(), single)},
		{ID: "hot-shared", Title: fmt.Sprintf("Hot key, %d workers, one shared client", w), kind: contended, Workers: w, Clients: 1, Nodes: 1, Entries: hot},
		{ID: "hot-clients", Title: fmt.Sprintf("Hot key, %d workers, %d clients", w, w), kind: contended, Workers: w, Clients: w, Nodes: 1, Note: perClient, Entries: hot},
		{ID: "work-shared", Title: fmt.Sprintf("Hot key, %v of work inside, %d workers, one shared client", c.Work, w), kind: contended, Workers: w, Clients: 1, Work: c.Work, Nodes: 1, Entries: hot},
		{ID: "work-clients", Title: fmt.Sprintf("Hot key, %v of work inside, %d workers, %d clients", c.Work, w, w), kind: contended, Workers: w, Clients: w, Work: c.Work, Nodes: 1, Note: perClient, Entries: hot},
		{ID: "holds", Title: fmt.Sprintf("%d long holds with auto-renewal for %v (lease %v, renewed every %v)", c.Holds, c.HoldFor, c.HoldLease, c.HoldLease/3),
			kind: holds, Workers: c.Holds, Clients: 1, Nodes: 1,
			Note: "Every library gets the same lease, renewed every lease/3: dlock by its watchdog (pipelined batches of 256), " +
				"rueidislock by its own extension timers (KeyValidity = lease, ExtendInterval = lease/3), redsync and bsm/redislock " +
				"(no watchdog) by a goroutine per lock calling Extend / Refresh, as their users write it. Retry settings play no part, so one row each " +
				"(two for rueidislock: NoLoopTracking off and on). Rates are per second of the hold window; CPU by getrusage (client) and /proc (redis-server).",
			Entries: holdEntries()},
		{ID: "redlock", Title: fmt.Sprintf("RedLock on %d nodes, %d workers", c.RedLockNodes, c.RedLockWorkers), kind: contended,
			Workers: c.RedLockWorkers, Clients: 1, Nodes: c.RedLockNodes,
			Entries: slices.Concat(libs.DlockRedLock(), libs.RedsyncRedLock())},
	}
}
