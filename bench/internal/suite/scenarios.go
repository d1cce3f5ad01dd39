package suite

import (
	"cmp"
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
	// Names > 1: each acquisition picks one of Names names at random (each
	// worker draws namesPerWorker of them up front).
	Names int
	// Fresh: each acquisition is on a name never used before, through a
	// lock handle made for it (a lock per order id).
	Fresh bool
	// HoldFor and HoldLease override the Config's for this holds scenario.
	HoldFor, HoldLease time.Duration
	// SampleKeys: sum MEMORY USAGE over every key in the middle of the
	// measured window (the waiters' queue while it is full).
	SampleKeys bool
	Note       string // printed under the title
	Entries    []libs.Entry
}

func (s Scenario) usesEtcd() bool {
	return slices.ContainsFunc(s.Entries, func(e libs.Entry) bool { return e.Client == "etcd" })
}

func (s Scenario) usesZooKeeper() bool {
	return slices.ContainsFunc(s.Entries, func(e libs.Entry) bool { return e.Client == zkClient })
}

// zkClient is the Client of the ZooKeeper rows.
const zkClient = "go-zookeeper"

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

// scaleHoldEntries are the rows of the holds-N scenarios: the peers only up to
// maxPeerHolds locks (a goroutine and a timer per lock each).
func scaleHoldEntries(n int) []libs.Entry {
	if n <= maxPeerHolds {
		return holdEntries()
	}
	return holdEntries()[:3]
}

const maxPeerHolds = 10000

// holdsNote is printed under every holds table.
const holdsNote = "Every library gets the same lease, renewed every lease/3: dlock by its watchdog (pipelined batches of 256), " +
	"rueidislock by its own extension timers (KeyValidity = lease, ExtendInterval = lease/3), redsync and bsm/redislock " +
	"(no watchdog) by a goroutine per lock calling Extend / Refresh, as their users write it. Retry settings play no part, so one row each " +
	"(two for rueidislock: NoLoopTracking off and on). Rates are per second of the hold window; CPU by getrusage (client) and /proc (redis-server). " +
	"**trips/tick**: renewal round trips per renewal interval. **heap B/lock**: Go heap (after GC) while holding, over the heap before, per lock " +
	"(the bench's own worker handle and witness, ~150 B, included). **Redis B/lock**: MEMORY USAGE summed over every key, per lock. " +
	"**loss→signal**: after the window every key is deleted (FLUSHALL); the time until the holder reports the loss (polled every 20 ms), p50 and max over the locks."

// sharedNote is printed under the shared-client scenarios.
const sharedNote = "One client object shared by every worker, the way one service instance uses a lock library: dlock one Client " +
	"(one go-redis client), redsync one pool, bsm/redislock one client, rueidislock one Locker (one rueidis client, which pipelines " +
	"the commands of concurrent callers on its connection)."

// freshNote is printed under the fresh-names tables.
const freshNote = "A lock per order id: every acquisition makes its lock handle (dlock `c.Mutex(name)`, redsync `NewMutex`, " +
	"bsm/redislock `Obtain` on the name, rueidislock `WithContext` on the name) on a name no acquisition used before, and releases it. " +
	"No contention: what is measured is the cost of the common path. dlock leaves no key per name (its fence counter is one per Redis hash slot)."

func scenarios(c Config) []Scenario {
	single := slices.Concat(libs.Dlock(), libs.Redsync(), libs.Redislock(), libs.Rueidislock())
	hot := slices.Concat(single, libs.Etcd(), libs.EtcdLock(), libs.ZooKeeper())
	w := c.Workers
	scale := []Scenario{}
	for _, n := range c.ScaleHolds {
		hf, hl := cmp.Or(c.ScaleHoldFor, c.HoldFor), cmp.Or(c.ScaleHoldLease, c.HoldLease)
		scale = append(scale, Scenario{ID: fmt.Sprintf("holds-%d", n),
			Title: fmt.Sprintf("%d long holds with auto-renewal for %v (lease %v, renewed every %v)", n, hf, hl, hl/3),
			kind:  holds, Workers: n, Clients: 1, Nodes: 1, HoldFor: hf, HoldLease: hl, Note: holdsNote, Entries: scaleHoldEntries(n)})
	}
	waitPeers := []libs.Entry{libs.Redsync()[0], libs.Redislock()[0], libs.Rueidislock()[0]}
	return append([]Scenario{
		{ID: "uncontended", Title: "Uncontended acquire+release, 1 worker", kind: contended, Workers: 1, Clients: 1, Nodes: 1,
			Entries: slices.Concat(libs.Floors(), single)},
		{ID: "fresh-names", Title: "Fresh names: 1 worker, a new lock handle on a new name for every acquisition", kind: contended, Workers: 1, Clients: 1, Nodes: 1, Fresh: true,
			Note: freshNote, Entries: slices.Concat(libs.Floors(), single)},
		{ID: "fresh-names-64", Title: fmt.Sprintf("Fresh names: %d workers, %d clients, a new lock handle on a new name for every acquisition", w, w), kind: contended, Workers: w, Clients: w, Nodes: 1, Fresh: true,
			Note: freshNote, Entries: slices.Concat(libs.Dlock(), []libs.Entry{libs.Redsync()[0], libs.Redislock()[1], libs.Rueidislock()[0]})},
		{ID: "orders-shared", Title: fmt.Sprintf("Orders, one shared client: %d workers, a new lock handle on a new name for every acquisition", w), kind: contended, Workers: w, Clients: 1, Nodes: 1, Fresh: true,
			Note: sharedNote + " " + freshNote, Entries: single},
		{ID: "many-names-shared", Title: fmt.Sprintf("Many names, one shared client: %d workers, %d names", w, c.Names), kind: contended, Workers: w, Clients: 1, Nodes: 1, Names: c.Names,
			Note:    sharedNote + fmt.Sprintf(" Each worker draws %d of the %d names at random up front and picks one of them at random for every acquisition: little contention.", namesPerWorker, c.Names),
			Entries: single},
		{ID: "hot-shared", Title: fmt.Sprintf("Hot key, %d workers, one shared client", w), kind: contended, Workers: w, Clients: 1, Nodes: 1, Entries: hot},
		{ID: "hot-clients", Title: fmt.Sprintf("Hot key, %d workers, %d clients", w, w), kind: contended, Workers: w, Clients: w, Nodes: 1, Note: perClient, Entries: hot},
		{ID: "work-shared", Title: fmt.Sprintf("Hot key, %v of work inside, %d workers, one shared client", c.Work, w), kind: contended, Workers: w, Clients: 1, Work: c.Work, Nodes: 1, Entries: hot},
		{ID: "work-clients", Title: fmt.Sprintf("Hot key, %v of work inside, %d workers, %d clients", c.Work, w, w), kind: contended, Workers: w, Clients: w, Work: c.Work, Nodes: 1, Note: perClient, Entries: hot},
		{ID: "many-names", Title: fmt.Sprintf("Many names: %d workers, %d clients, %d names", w, w, c.Names), kind: contended, Workers: w, Clients: w, Nodes: 1, Names: c.Names,
			Note: fmt.Sprintf("Each worker draws %d of the %d names at random up front and picks one of them at random for every acquisition: little contention. "+
				"Retry settings barely matter here: redsync and rueidislock run their defaults, bsm/redislock its 1 ms retry.", namesPerWorker, c.Names),
			Entries: slices.Concat(libs.Dlock(), []libs.Entry{libs.Redsync()[0], libs.Redislock()[1], libs.Rueidislock()[0]})},
		{ID: "holds", Title: fmt.Sprintf("%d long holds with auto-renewal for %v (lease %v, renewed every %v)", c.Holds, c.HoldFor, c.HoldLease, c.HoldLease/3),
			kind: holds, Workers: c.Holds, Clients: 1, Nodes: 1, Note: holdsNote, Entries: holdEntries()},
		{ID: "redlock", Title: fmt.Sprintf("RedLock on %d nodes, %d workers", c.RedLockNodes, c.RedLockWorkers), kind: contended,
			Workers: c.RedLockWorkers, Clients: 1, Nodes: c.RedLockNodes,
			Entries: slices.Concat(libs.DlockRedLock(), libs.RedsyncRedLock())},
		{ID: "waiters", Title: fmt.Sprintf("Waiters at scale: %d workers on one name, %d clients", c.Waiters, c.WaiterClients), kind: contended,
			Workers: c.Waiters, Clients: c.WaiterClients, Nodes: 1, SampleKeys: true,
			Note: "No work inside. The peers run their defaults (with a 1 ms retry, 1 000 pollers saturate Redis and the machine). " +
				"**Redis B in keys**: MEMORY USAGE summed over every key in the middle of the window (dlock: the lock, its queue and the waiters' deadlines; " +
				"the SCAN and MEMORY USAGE calls, a handful, count in the commands).",
			Entries: slices.Concat(libs.Dlock(), waitPeers)},
	}, scale...)
}
