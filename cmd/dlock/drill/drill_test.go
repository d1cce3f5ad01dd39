package drill_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/drill"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openRedis starts the embedded default for one test.
func openRedis(t *testing.T) *backend.Backend {
	t.Helper()
	r, err := backend.Open(context.Background(), backend.Redis, "")
	if err != nil {
		t.Fatalf("embedded redis: %v (install redis-server: apt-get install redis-server)", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// checkClaims asserts that every line of a drill's text that says who is
// inside agrees with the spans the drill recorded: a line claiming company
// ("inside too", "two holders", "two workers") is an entry while another
// holder's span was open; an entry while another was inside says so.
// Checked by hand here, not with the drill's own code.
func checkClaims(t *testing.T, s *drill.Summary) {
	t.Helper()
	var b bytes.Buffer
	if err := s.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	for _, p := range s.Parts {
		for _, e := range p.Events {
			prefix := fmt.Sprintf("%8.1f ms  %-3s %s", e.AtMS, e.Who, e.What)
			i := strings.Index(text, prefix)
			if i < 0 {
				t.Fatalf("no line %q in\n%s", prefix, text)
			}
			line, _, _ := strings.Cut(text[i:], "\n")
			claims := strings.Contains(line, "inside too") || strings.Contains(line, "two holders") || strings.Contains(line, "two workers")
			// Who else was inside when e.Who entered at e.AtMS, by the spans.
			var others []string
			for _, me := range s.Spans {
				if me.Who != e.Who || me.StartMS < e.AtMS-1 || me.StartMS > e.AtMS+1 {
					continue
				}
				for _, o := range s.Spans {
					if o.Lane == me.Lane && o.Who != me.Who && o.StartMS <= me.StartMS && o.EndMS > me.StartMS {
						others = append(others, o.Who)
					}
				}
			}
			switch {
			case claims && len(others) == 0:
				t.Errorf("%q claims company, but by the spans no one else was inside then:\n%s", line, text)
			case e.Span > 0 && len(others) > 0 && !strings.Contains(line, others[0]+" is inside too") && !strings.Contains(line, others[0]+" and "):
				t.Errorf("%q: %v was inside when %s entered, the line does not say so", line, others, e.Who)
			}
		}
	}
}

func TestMisdelete(t *testing.T) {
	res, err := drill.Misdelete(context.Background(), openRedis(t), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	checkClaims(t, res.Summary())
	if res.NaiveDoubleGrants != 2 || res.SafeDoubleGrants != 0 {
		t.Errorf("double grants: naive %d (want B beside A, C beside B: 2), safe %d (want 0)", res.NaiveDoubleGrants, res.SafeDoubleGrants)
	}
	if !res.NaiveDeletedForeignLock {
		t.Error("GET-then-DEL did not delete the foreign lock: the drill does not reproduce 000 §3.1")
	}
	if res.SafeDeletedForeignLock {
		t.Error("the Lua release deleted the foreign lock")
	}
	if res.SafeUnlockError == "" {
		t.Error("A's unlock of an expired lock reported no loss")
	}
}

func TestLease(t *testing.T) {
	const lease, work = 500 * time.Millisecond, 800 * time.Millisecond
	res, err := drill.Lease(context.Background(), openRedis(t), lease, work)
	if err != nil {
		t.Fatal(err)
	}
	checkClaims(t, res.Summary())
	interval := float64(lease/3) / 1e6
	if got := res.SecondHolderEnteredMS; got < 500 || got > 500+interval {
		t.Errorf("second holder entered at %.1f ms, want between 500 and %.0f", got, 500+interval)
	}
	if res.FirstNotifiedLostMS <= 0 || res.FirstNotifiedLostMS > res.SecondHolderEnteredMS {
		t.Errorf("first told it lost at %.1f ms; second entered at %.1f ms", res.FirstNotifiedLostMS, res.SecondHolderEnteredMS)
	}
	if res.FirstUnlockError == "" {
		t.Error("the first holder's unlock after its lease reported no loss")
	}
	if got := res.WatchdogLockLivedMS; got < 800 || got > 800+interval {
		t.Errorf("watchdog lock lived %.1f ms, want about the work (800 ms)", got)
	}
	if res.Renewals < 3 {
		t.Errorf("%d renewals in 800 ms at %.0f ms intervals", res.Renewals, interval)
	}
}

func TestContention(t *testing.T) {
	res, err := drill.Contention(context.Background(), openRedis(t), 2, 50, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Acquisitions != 100 {
		t.Fatalf("acquisitions %d, want 100", res.Acquisitions)
	}
	if !(res.P50MS <= res.P90MS && res.P90MS <= res.P99MS && res.P99MS <= res.MaxMS) {
		t.Fatalf("percentiles out of order: %+v", res)
	}
	n := 0
	for _, b := range res.Histogram {
		n += b.Count
	}
	if n != 100 {
		t.Fatalf("histogram holds %d waits, want 100", n)
	}
}
