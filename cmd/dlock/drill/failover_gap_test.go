package drill

import "testing"

func TestLongestGap(t *testing.T) {
	spans := []Span{{StartMS: 50}, {StartMS: 120}, {StartMS: 400}, {StartMS: 420}, {StartMS: 900}}
	for _, c := range []struct {
		from, to, want float64
	}{
		{0, 1000, 480},    // 420 → 900
		{100, 410, 280},   // 120 → 400
		{910, 2000, 1090}, // nothing after the fault: all of it
		{0, 40, 40},       // before the first start
	} {
		if got := longestGap(spans, c.from, c.to); got != c.want {
			t.Errorf("longestGap(%v, %v) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
}
