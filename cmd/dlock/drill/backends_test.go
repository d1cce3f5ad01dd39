package drill_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlockgo/dlock/cmd/dlock/backend"
	"github.com/dlockgo/dlock/cmd/dlock/drill"
)

// openBackend starts the embedded server of kind for one test.
func openBackend(t *testing.T, kind string) *backend.Backend {
	t.Helper()
	b, err := backend.Open(context.Background(), kind, "")
	if err != nil {
		t.Fatalf("embedded %s: %v", kind, err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// The lease drill on every backend: the second holder gets in once the
// first's fixed lease ran out (never before it), the first is told before
// the second gets in, and under renewals the lock lives as long as the work.
func TestLeaseOnEveryBackend(t *testing.T) {
	const lease, work = time.Second, 1600 * time.Millisecond
	for _, kind := range backend.Kinds {
		t.Run(kind, func(t *testing.T) {
			res, err := drill.Lease(context.Background(), openBackend(t, kind), lease, work)
			if err != nil {
				t.Fatal(err)
			}
			checkClaims(t, res.Summary())
			if res.Backend != kind {
				t.Errorf("backend %q", res.Backend)
			}
			// etcd expires leases in whole seconds, checked every 500 ms.
			if got := res.SecondHolderEnteredMS; got < 1000 || got > 2500 {
				t.Errorf("second holder entered at %.1f ms, want after the 1000 ms lease", got)
			}
			if res.FirstNotifiedLostMS <= 0 || res.FirstNotifiedLostMS > res.SecondHolderEnteredMS {
				t.Errorf("first told it lost at %.1f ms; second entered at %.1f ms", res.FirstNotifiedLostMS, res.SecondHolderEnteredMS)
			}
			if res.FirstUnlockError == "" {
				t.Error("the first holder's unlock after its lease reported no loss")
			}
			if got := res.WatchdogLockLivedMS; got < 1600 {
				t.Errorf("renewed lock lived %.1f ms, want at least the work (1600 ms)", got)
			}
		})
	}
}

// The issue-20 run: `dlock drill lease --backend etcd` at its defaults (500 ms
// lease, 800 ms of work) once printed "B acquired: now two workers are
// inside" when B got in after A's Unlock. Whatever etcd does with the
// lease, the lines must agree with the recorded spans.
func TestLeaseEtcdDefaults(t *testing.T) {
	res, err := drill.Lease(context.Background(), openBackend(t, backend.Etcd), 500*time.Millisecond, 800*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	checkClaims(t, res.Summary())
}
