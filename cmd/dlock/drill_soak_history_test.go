package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/drill"
)

// completions lists, per operation of the --history file, the events that
// complete its invocation (a loss signal is one event of its own).
var completions = map[string][]string{
	drill.OpAcquire:     {drill.EvGranted, drill.EvRefused},
	drill.OpRelease:     {drill.EvReturned},
	drill.OpFencedWrite: {drill.EvAccepted, drill.EvRejected, drill.EvReturned},
	drill.OpPlainWrite:  {drill.EvReturned},
	drill.OpRead:        {drill.EvReturned},
}

// A short real soak on Redis with --history: every line is one event with
// every field filled in, in time order; per client, every completion
// follows its own invocation and no client invokes twice at once; granted
// tokens strictly increase per name; and the file has as many grants as
// the soak reported acquisitions, and the loss signals and fenced writes
// it counted.
func TestDrillSoakHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history.jsonl")
	code, out, stderr := dlock(t, "drill", "soak", "--duration", "8s", "--every", "3s", "--down", "2s",
		"--faults", "pause,kill", "--json", "--history", path)
	var res drill.SoakResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pending := map[string]drill.HistoryEvent{} // client -> its invocation in flight
	lastToken := map[string]int64{}            // name -> last granted token
	var last int64
	var grants, losses, writes, stale, reads int
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		var e drill.HistoryEvent
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("line %d: %v: %s", n, err, sc.Text())
		}
		wall, err := time.Parse(time.RFC3339Nano, e.Wall)
		switch {
		case err != nil || time.Since(wall) > time.Minute || time.Since(wall) < 0:
			t.Fatalf("line %d: wall %q: %v (want a time of this run)", n, e.Wall, err)
		case e.T < last:
			t.Fatalf("line %d: t_ns %d before the line above's %d", n, e.T, last)
		case e.Client == "" || e.Name == "":
			t.Fatalf("line %d: no client or name: %s", n, sc.Text())
		}
		last = e.T
		p, inFlight := pending[e.Client]
		switch {
		case e.Op == drill.OpLost:
			if e.Event != drill.EvSignal || inFlight || e.HeldNS <= 0 || e.HeldNS > e.T || e.Token == 0 {
				t.Fatalf("line %d: a loss signal must be one event after the hold was seen held, none in flight: %s", n, sc.Text())
			}
			losses++
		case e.Event == drill.EvInvoke:
			if inFlight || e.Result != "" {
				t.Fatalf("line %d: %s invokes %s while %s is in flight (or with a result): %s", n, e.Client, e.Op, p.Op, sc.Text())
			}
			if _, ok := completions[e.Op]; !ok {
				t.Fatalf("line %d: operation %q", n, e.Op)
			}
			pending[e.Client] = e
		default:
			ok := false
			for _, ev := range completions[e.Op] {
				ok = ok || ev == e.Event
			}
			if !inFlight || p.Op != e.Op || p.Name != e.Name || !ok || e.Result == "" {
				t.Fatalf("line %d: %s %s completes %+v: want its own invocation first and a result", n, e.Op, e.Event, p)
			}
			delete(pending, e.Client)
		}
		switch {
		case e.Event == drill.EvGranted:
			if e.Token <= lastToken[e.Name] || e.Result != "ok" {
				t.Fatalf("line %d: token %d granted on %s after %d", n, e.Token, e.Name, lastToken[e.Name])
			}
			lastToken[e.Name] = e.Token
			grants++
		case e.Event == drill.EvAccepted || e.Event == drill.EvRejected:
			writes++
			if e.Event == drill.EvRejected {
				stale++
			}
		case e.Op == drill.OpRead && e.Event == drill.EvReturned:
			reads++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if grants == 0 || grants != res.Acquisitions || losses != res.Losses || writes != res.FencedWrites ||
		stale != res.StaleWritesRejected || reads != res.Names {
		t.Errorf("history: %d grants, %d loss signals, %d fenced writes (%d rejected), %d final reads; the soak reported %d, %d, %d (%d), %d names",
			grants, losses, writes, stale, reads, res.Acquisitions, res.Losses, res.FencedWrites, res.StaleWritesRejected, res.Names)
	}
	if len(pending) != 0 {
		t.Errorf("invocations never completed: %v", pending)
	}
}
