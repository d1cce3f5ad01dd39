package drill

import (
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
)

// The defaults the drills take for an option left at its zero value: what
// the command's flags show as their defaults (its TestHelpDefaults checks
// them against these).

// FailoverDefaults returns the Redis failover drill's defaults (fault
// crash, every mode).
func FailoverDefaults() FailoverOptions {
	o := FailoverOptions{Fault: "crash"}
	_ = o.defaults()
	return o
}

// ConsensusFailoverDefaults returns the etcd and ZooKeeper failover drill's
// defaults (fault FaultKill); they are the same on both.
func ConsensusFailoverDefaults() ConsensusFailoverOptions {
	o := ConsensusFailoverOptions{Backend: backend.Etcd, Fault: FaultKill}
	_ = o.defaults()
	o.Backend = ""
	return o
}

// SoakDefaults returns the soak's defaults on Redis (Faults: every fault
// of the backend, SoakFaults).
func SoakDefaults() SoakOptions {
	o := SoakOptions{Backend: backend.Redis}
	_ = o.defaults()
	o.Backend, o.Faults = "", nil
	return o
}

// LeaderDefaults returns the leader drill's defaults.
func LeaderDefaults() LeaderOptions {
	return LeaderOptions{Replicas: 3, Kills: 3, Session: 2 * time.Second}
}

// plural returns n and word, in the plural unless n is 1: "1 run", "2
// runs", "3 processes".
func plural[N ~int | ~int64](n N, word string) string {
	if n == 1 {
		return "1 " + word
	}
	if strings.HasSuffix(word, "s") {
		word += "e"
	}
	return strconv.FormatInt(int64(n), 10) + " " + word + "s"
}
