package drill_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/drill"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// openRedis starts the embedded default for one test.
func openRedis(t *testing.T) *drill.Redis {
	t.Helper()
	r, err := drill.OpenRedis(context.Background(), "")
	if err != nil {
		t.Fatalf("embedded redis: %v (install redis-server: apt-get install redis-server)", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestMisdelete(t *testing.T) {
	res, err := drill.Misdelete(context.Background(), openRedis(t), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
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
