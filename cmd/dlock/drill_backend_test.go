package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
)

// drillJSON runs a drill with --json, fails the test on a non-zero exit,
// and decodes its output into v.
func drillJSON(t *testing.T, v any, args ...string) string {
	t.Helper()
	code, out, stderr := dlock(t, append(args, "--json")...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v: not JSON: %v\n%s", args, err, out)
	}
	return stderr
}

// The contention drill on every backend: every worker's acquisitions are
// counted, the percentiles are in order, and the rate is measured.
func TestDrillContentionOnEveryBackend(t *testing.T) {
	for _, kind := range backend.Kinds {
		t.Run(kind, func(t *testing.T) {
			var res struct {
				Backend      string  `json:"backend"`
				Acquisitions int     `json:"acquisitions"`
				P50          float64 `json:"p50_ms"`
				P99          float64 `json:"p99_ms"`
				Handoffs     float64 `json:"handoffs_per_s"`
			}
			stderr := drillJSON(t, &res, "drill", "contention", "--backend", kind, "--workers", "3", "--loops", "10", "--work", "1ms")
			if !strings.HasPrefix(stderr, kind+": ") {
				t.Errorf("first line %q does not name the backend", stderr)
			}
			if res.Backend != kind || res.Acquisitions != 30 || res.P50 > res.P99 || res.Handoffs <= 0 {
				t.Fatalf("contention on %s: %+v", kind, res)
			}
		})
	}
}

// The pause drill on every backend: the frozen holder's session runs out,
// a second holder gets a newer token, and only the fence stops the frozen
// holder's write (the plain one overwrites).
func TestDrillPauseOnEveryBackend(t *testing.T) {
	for _, kind := range backend.Kinds {
		t.Run(kind, func(t *testing.T) {
			var res struct {
				Backend   string  `json:"backend"`
				TokenA    int64   `json:"paused_holder_token"`
				TokenB    int64   `json:"second_holder_token"`
				Rejected  bool    `json:"paused_holder_write_rejected"`
				Clobbered bool    `json:"unfenced_write_overwrote"`
				Overlap   float64 `json:"overlap_ms"`
			}
			drillJSON(t, &res, "drill", "pause", "--backend", kind, "--lease", "1s")
			if res.Backend != kind || res.TokenB <= res.TokenA || !res.Rejected || !res.Clobbered || res.Overlap <= 0 {
				t.Fatalf("pause on %s: %+v", kind, res)
			}
		})
	}
}

func TestDrillBackendBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"drill", "contention", "--backend", "mysql"},
		{"drill", "failover", "--backend", "mysql"},
		{"drill", "failover", "--backend", "etcd", "--fault", "flood"},
		{"drill", "failover", "--backend", "zookeeper", "--mode", "plain"},
		{"drill", "failover", "--backend", "etcd", "--down", "0s"},
		{"drill", "failover", "--down", "2s"},
	} {
		code, _, stderr := dlock(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
	}
}

// The failover drill on a 3-member etcd cluster and a 3-server ZooKeeper
// ensemble, one short run per fault: the leader is faulted, the sale goes on
// on the other members, and the lock service grants no lock twice (the
// witness) while the fenced ledger never oversells and tokens increase. With
// the leader cut off from its peers, every lock held across the cut by a
// client that reaches only the old leader is told lost before the majority
// grants it again.
func TestDrillFailoverConsensus(t *testing.T) {
	for _, kind := range []string{backend.Etcd, backend.ZooKeeper} {
		for _, fault := range []string{"kill", "pause", "partition"} {
			t.Run(kind+"/"+fault, func(t *testing.T) {
				var res struct {
					Backend string `json:"backend"`
					Fault   string `json:"fault"`
					Runs    []struct {
						Acquisitions   int     `json:"acquisitions"`
						DoubleGrants   int     `json:"double_grants"`
						OversoldFenced int64   `json:"oversold_fenced"`
						OldLeader      int     `json:"old_leader"`
						TokensOut      int     `json:"tokens_out_of_order"`
						MinorityHolds  int     `json:"minority_holds"`
						ToldInTime     int     `json:"told_in_time"`
						ElectedMS      float64 `json:"elected_ms"`
					} `json:"runs"`
				}
				drillJSON(t, &res, "drill", "failover", "--backend", kind, "--fault", fault, "--runs", "1",
					"--workers", "8", "--before", "1s", "--down", "2s", "--after", "1s")
				if res.Backend != kind || res.Fault != fault || len(res.Runs) != 1 {
					t.Fatalf("result %+v", res)
				}
				r := res.Runs[0]
				if r.Acquisitions == 0 || r.OldLeader < 0 || r.OldLeader > 2 {
					t.Fatalf("run %+v", r)
				}
				if r.DoubleGrants != 0 || r.OversoldFenced != 0 || r.TokensOut != 0 {
					t.Fatalf("%s granted a lock twice (or tokens went back) across a %s of the leader: %+v", kind, fault, r)
				}
				if fault == "partition" && (r.MinorityHolds == 0 || r.ToldInTime != r.MinorityHolds || r.ElectedMS <= 0) {
					t.Fatalf("partition: %d locks held across the cut, %d told before the majority granted them again, majority's leader after %.0f ms: %+v",
						r.MinorityHolds, r.ToldInTime, r.ElectedMS, r)
				}
			})
		}
	}
}

// The sale's lock strategies on etcd and ZooKeeper: each sells exactly the
// stock and never oversells, with locks from the --backend service.
func TestSeckillOnConsensusBackends(t *testing.T) {
	for _, kind := range []string{backend.Etcd, backend.ZooKeeper} {
		t.Run(kind, func(t *testing.T) {
			code, out, stderr := dlock(t, "seckill", "--backend", kind, "--buyers", "60", "--stock", "5",
				"--strategy", "lock", "--strategy", "fenced", "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !strings.Contains(stderr, kind+": ") {
				t.Errorf("no %s line on stderr: %q", kind, stderr)
			}
			dec := json.NewDecoder(strings.NewReader(out))
			rows := 0
			for dec.More() {
				var row struct {
					Strategy string `json:"strategy"`
					Sold     int64  `json:"sold"`
					Oversold int64  `json:"oversold"`
				}
				if err := dec.Decode(&row); err != nil {
					t.Fatalf("not JSON: %v\n%s", err, out)
				}
				rows++
				if row.Sold != 5 || row.Oversold != 0 {
					t.Errorf("%s on %s: %+v", row.Strategy, kind, row)
				}
			}
			if rows != 2 {
				t.Fatalf("%d rows, want 2:\n%s", rows, out)
			}
		})
	}
}
