package drill

import (
	"testing"
	"time"
)

func TestLongestGap(t *testing.T) {
	ms := time.Millisecond
	spans := []holdSpan{{start: 50 * ms}, {start: 120 * ms}, {start: 400 * ms}, {start: 420 * ms}, {start: 900 * ms}}
	for _, c := range []struct {
		from, to, want time.Duration
	}{
		{0, time.Second, 480 * ms},             // 420 → 900
		{100 * ms, 410 * ms, 280 * ms},         // 120 → 400
		{910 * ms, 2 * time.Second, 1090 * ms}, // nothing after the fault: all of it
		{0, 40 * ms, 40 * ms},                  // before the first start
	} {
		if got := longestGap(spans, c.from, c.to); got != c.want {
			t.Errorf("longestGap(%v, %v) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
