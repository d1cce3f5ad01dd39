package faults_test

import (
	"cmp"
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock/internal/redisproc"
	"github.com/dlockgo/dlock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// wd is the watchdog timeout of the process-fault scenarios: a fault that
// freezes Redis for freeze outlasts it.
const (
	wd     = 800 * time.Millisecond
	freeze = 2*wd + 200*time.Millisecond
)

// processFault is one fault of the redis-server process.
type processFault struct {
	name   string
	args   []string // redis-server arguments
	expect lossExpect
	kept   bool // Redis keeps its data through it: the mutex model applies
	// wd overrides the watchdog timeout: a fault that must cost no lock
	// gets room for a slow renewal round on a loaded machine.
	wd     time.Duration
	strike func(t *testing.T, srv *redisproc.Server, admin *redis.Client)
}

var processFaults = []processFault{
	{name: "SIGSTOP", expect: mustLose, kept: true, strike: func(t *testing.T, srv *redisproc.Server, _ *redis.Client) {
		if err := srv.Pause(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(freeze) // the fault is a duration
		if err := srv.Resume(); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "CLIENT-PAUSE", expect: mustLose, kept: true, strike: func(t *testing.T, _ *redisproc.Server, admin *redis.Client) {
		if err := admin.Do(context.Background(), "CLIENT", "PAUSE", freeze.Milliseconds(), "ALL").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(freeze)
	}},
	{name: "DEBUG-SLEEP", args: []string{"--enable-debug-command", "yes"}, expect: mustLose, kept: true,
		strike: func(t *testing.T, _ *redisproc.Server, admin *redis.Client) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := admin.Do(ctx, "DEBUG", "SLEEP", freeze.Seconds()).Err(); err != nil {
				t.Fatal(err)
			}
		}},
	{name: "SIGKILL-restart-empty", expect: mustLose, kept: false, strike: func(t *testing.T, srv *redisproc.Server, _ *redis.Client) {
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "SIGKILL-restart-appendonly", args: []string{"--appendonly", "yes", "--appendfsync", "always"}, expect: mayLose, kept: true,
		strike: func(t *testing.T, srv *redisproc.Server, _ *redis.Client) {
			if err := srv.Restart(); err != nil {
				t.Fatal(err)
			}
		}},
	{name: "SCRIPT-FLUSH", expect: mustKeep, kept: true, wd: 2 * time.Second, strike: func(t *testing.T, _ *redisproc.Server, admin *redis.Client) {
		if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "FLUSHALL", expect: mustLose, kept: false, strike: func(t *testing.T, _ *redisproc.Server, admin *redis.Client) {
		if err := admin.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
	}},
}

// TestProcessFaults strikes each process fault once while every shape is
// held (one holder and one contender per shape, each its own Client), then
// checks each shape's history: fenced register and tokens always, the mutex
// model when Redis kept its data, the loss signal against the server-side
// expiry, zombie holds and leaked keys.
func TestProcessFaults(t *testing.T) {
	for _, pf := range processFaults {
		t.Run(pf.name, func(t *testing.T) {
			noLeaks(t)
			srv := redistest.Start(t, pf.args...)
			st := store(t)
			admin := newRDB(t, srv.Addr())
			probe := probeClient(t, srv)
			scs := make([]*scenario, len(shapes))
			for i, sh := range shapes {
				scs[i] = setUp(t, sh, "pf-"+sh.name, newRDB(t, srv.Addr()), newRDB(t, srv.Addr()), probe, st, cmp.Or(pf.wd, wd))
			}
			for _, sc := range scs {
				if !sc.ew.MustSample() { // the last expiry before the fault
					t.Fatalf("%s: cannot read the holder's expiry", sc.sh.name)
				}
			}
			at := time.Now()
			pf.strike(t, srv, admin)
			for i, sh := range shapes {
				t.Run(sh.name, func(t *testing.T) {
					scs[i].t = t
					report(t, scs[i].finish(pf.name, at, pf.expect, pf.kept))
				})
			}
		})
	}
}
