package suite

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dlockgo/dlock/bench/internal/measure"
)

// RoundRatio is, for one service of a scenario, the ratio of our first row
// to the best peer of the same service in each round (both measured in
// that round, interleaved), and their median and range: the figure that
// holds on a noisy machine, where the medians of rows measured at
// different moments can move 1.5–2× apart.
type RoundRatio struct {
	Service string    `json:"service"` // redis, etcd or zookeeper
	Ours    string    `json:"ours"`    // the row compared
	Rounds  []float64 `json:"rounds"`  // one ratio per round that measured both
	Median  float64   `json:"median"`
	Min     float64   `json:"min"`
	Max     float64   `json:"max"`
}

// service is the lock service a row runs on.
func service(r *Row) string {
	switch r.Client {
	case "etcd":
		return "etcd"
	case zkClient:
		return "zookeeper"
	}
	return "redis"
}

// ours reports whether r is one of this project's rows.
func ours(r *Row) bool { return r.Lib == "dlock" || r.Lib == "zklock" }

// roundRatios computes t's per-round ratios, one per service on which it
// has our row and at least one peer.
func (t *Table) roundRatios() []RoundRatio {
	if t.Holds {
		return nil
	}
	headline := func(m Measurement) float64 {
		if t.Workers > 1 && !t.Fresh {
			return m.HandoffsPerSec()
		}
		return m.AcqPerSec()
	}
	var out []RoundRatio
	seen := map[string]bool{}
	for _, base := range t.Rows {
		svc := service(base)
		if !ours(base) || seen[svc] {
			continue
		}
		seen[svc] = true
		best := map[int]float64{} // round: the best peer's headline
		for _, r := range t.Rows {
			if ours(r) || r.Floor || service(r) != svc {
				continue
			}
			for _, m := range r.Runs {
				best[m.Round] = max(best[m.Round], headline(m))
			}
		}
		rr := RoundRatio{Service: svc, Ours: base.label()}
		for _, m := range base.Runs {
			if b := best[m.Round]; b > 0 {
				rr.Rounds = append(rr.Rounds, headline(m)/b)
			}
		}
		if len(rr.Rounds) == 0 {
			continue
		}
		rr.Median = measure.Median(rr.Rounds)
		rr.Min, rr.Max = slices.Min(rr.Rounds), slices.Max(rr.Rounds)
		out = append(out, rr)
	}
	return out
}

// writeRoundRatios writes t's per-round ratios under its table.
func (t *Table) writeRoundRatios(w io.Writer) {
	for _, rr := range t.RoundRatios {
		rounds := make([]string, len(rr.Rounds))
		for i, x := range rr.Rounds {
			rounds[i] = ratio(x)
		}
		fmt.Fprintf(w, "\n%s over the best %s peer of each round: %s; median %s (range %s–%s).\n",
			rr.Ours, rr.Service, strings.Join(rounds, ", "), ratio(rr.Median), ratio(rr.Min), ratio(rr.Max))
	}
}
