package suite

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Resummarise recomputes every row's medians, totals and ratios from its
// runs (after a report was read back from JSON).
func (rep *Report) Resummarise() {
	for _, t := range rep.Tables {
		for _, r := range t.Rows {
			r.summarise()
		}
		t.ratios()
	}
}

// WriteMarkdown writes one Markdown table per scenario, with the machine
// and the configuration first.
func (rep *Report) WriteMarkdown(w io.Writer) {
	m := rep.Machine
	fmt.Fprintf(w, "Machine: %s, %d cores (GOMAXPROCS %d), %s, %s, redis-server %s; load average at start %s.\n\n",
		m.CPU, m.Cores, m.GOMAXPROCS, m.OS, m.Go, m.RedisVersion, m.LoadAvg)
	c := rep.Config
	fmt.Fprintf(w, "Runs: %d rounds, %v measured (after %v warm-up) per library per round, wait budget %v per acquisition; medians of the rounds (overlaps and failures: totals).\n",
		c.Rounds, c.Duration, c.Warmup, c.Wait)
	for _, t := range rep.Tables {
		fmt.Fprintf(w, "\n### %s\n\n", t.Title)
		if t.Note != "" {
			fmt.Fprintf(w, "%s\n\n", t.Note)
		}
		if t.Holds {
			t.writeHolds(w)
		} else {
			t.writeContended(w)
			t.writeRoundRatios(w)
		}
	}
}

func (t *Table) writeContended(w io.Writer) {
	uncontended := t.Workers == 1 || t.Fresh
	head := []string{"library", "setting", "acq/s", "handoffs/s", "wait p50", "p99", "max", "failures", "Jain", "Redis cmds/acq", "Redis CPU µs/acq", "allocs/acq", "overlaps", "vs dlock"}
	if uncontended {
		head = []string{"library", "setting", "pairs/s", "vs floor", "acquire p50", "p99", "max", "failures", "Redis cmds/pair", "Redis CPU µs/pair", "allocs/pair", "client CPU µs/pair", "overlaps", "vs dlock"}
	}
	keyBytes := t.ID == "waiters" // the scenario that samples its keys
	if keyBytes {
		head = append(head, "Redis B in keys")
	}
	var rows [][]string
	for _, r := range t.Rows {
		s := r.Median
		cmds, server := f1(s.CmdsPerAcq), f1(s.ServerCPUPerAcq)
		if r.Client == "etcd" || r.Client == zkClient {
			cmds, server = "—", "—"
		}
		if uncontended {
			rows = append(rows, []string{r.label(), r.Setting, f0(s.AcqPerSec), ratio(r.VsFloor), dur(s.WaitP50), dur(s.WaitP99), dur(s.WaitMax),
				strconv.FormatInt(r.Failures, 10), cmds, server, f1(s.AllocsPerAcq), f1(s.ClientCPUPerAcq), overlaps(r), ratio(r.VsDlock)})
			continue
		}
		row := []string{r.label(), r.Setting, f0(s.AcqPerSec), f0(s.HandoffsPerSec), dur(s.WaitP50), dur(s.WaitP99), dur(s.WaitMax),
			strconv.FormatInt(r.Failures, 10), fmt.Sprintf("%.3f", s.Jain), cmds, server, f1(s.AllocsPerAcq), overlaps(r), ratio(r.VsDlock)}
		if keyBytes {
			row = append(row, f0(s.RedisBytes))
		}
		rows = append(rows, row)
	}
	markdown(w, head, rows)
}

func (t *Table) writeHolds(w io.Writer) {
	head := []string{"library", "setting", "held", "lost", "failures", "Redis cmds/s", "renewal calls/s", "round trips/s", "trips/tick", "client CPU ms/s", "Redis CPU ms/s",
		"allocs/s", "goroutines", "heap B/lock", "Redis B/lock", "loss→signal p50", "max", "overlaps"}
	var rows [][]string
	for _, r := range t.Rows {
		s := r.Median
		loss50, lossMax := "—", "—"
		if s.LossSeen > 0 {
			loss50, lossMax = dur(s.LossP50), dur(s.LossMax)
			if s.LossSeen < s.Held-s.Lost {
				lossMax = fmt.Sprintf("> %s (%.0f of %.0f)", lossMax, s.LossSeen, s.Held-s.Lost)
			}
		}
		rows = append(rows, []string{r.label(), r.Setting, f0(s.Held), f0(s.Lost), strconv.FormatInt(r.Failures, 10), f0(s.CmdsPerSec), f1(s.CallsPerSec), f1(s.TripsPerSec),
			f1(s.TripsPerTick), f1(s.ClientCPUms), f1(s.ServerCPUms), f0(s.AllocsPerSec), f0(s.Goroutines), f0(s.HeapPerHold), f0(s.RedisPerKey), loss50, lossMax, overlaps(r)})
	}
	markdown(w, head, rows)
}

func overlaps(r *Row) string {
	if r.Floor {
		return "—"
	}
	return strconv.FormatInt(r.Overlaps, 10)
}

func f0(x float64) string { return strconv.FormatFloat(x, 'f', 0, 64) }
func f1(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }

func ratio(x float64) string {
	if x == 0 {
		return "—"
	}
	return strconv.FormatFloat(x, 'f', 2, 64) + "×"
}

// dur formats milliseconds: µs below 1 ms, ms above.
func dur(ms float64) string {
	switch {
	case ms == 0:
		return "0"
	case ms < 1:
		return f0(ms*1000) + " µs"
	case ms < 100:
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	}
	return f0(ms) + " ms"
}

func markdown(w io.Writer, head []string, rows [][]string) {
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len([]rune(h))
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(cells []string, right func(int) bool) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if right(i) {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	numeric := func(i int) bool { return i >= 2 }
	line(head, numeric)
	sep := make([]string, len(head))
	for i := range sep {
		if numeric(i) {
			sep[i] = strings.Repeat("-", width[i]-1) + ":"
		} else {
			sep[i] = strings.Repeat("-", width[i])
		}
	}
	line(sep, func(int) bool { return false })
	for _, r := range rows {
		line(r, numeric)
	}
}
