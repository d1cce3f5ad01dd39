package seam

import "testing"

// TestAdmission: the rule of a grant, for each mode, over the places
// around it (in any order), and which of them are in its way.
func TestAdmission(t *testing.T) {
	ahead := func(m Mode) Other { return Other{Mode: m, Ahead: true} }
	after := func(m Mode) Other { return Other{Mode: m} }
	own := func(o Other) Other { o.Own = true; return o }
	for _, tc := range []struct {
		what    string
		mode    Mode
		permits int
		others  []Other
		granted bool
		inWay   []bool // per other
	}{
		{"exclusive alone", Exclusive, 0, nil, true, nil},
		{"exclusive behind anyone", Exclusive, 0, []Other{after(Exclusive), ahead(Shared)}, false, []bool{false, true}},
		{"exclusive before waiters", Exclusive, 0, []Other{after(Exclusive), after(Shared), after(Permit)}, true, []bool{false, false, false}},
		{"exclusive and a downgrade after it", Exclusive, 0, []Other{after(Downgrade)}, false, []bool{true}},
		{"exclusive and its own downgrade", Exclusive, 0, []Other{own(after(Downgrade))}, true, []bool{false}},
		{"shared behind readers", Shared, 0, []Other{ahead(Shared), ahead(Downgrade), after(Exclusive)}, true, []bool{false, false, false}},
		{"shared behind a writer", Shared, 0, []Other{ahead(Shared), ahead(Exclusive)}, false, []bool{false, true}},
		{"shared under its own writer", Shared, 0, []Other{own(ahead(Exclusive))}, true, []bool{false}},
		{"shared under its own writer, another queued", Shared, 0, []Other{own(ahead(Exclusive)), ahead(Exclusive)}, false, []bool{false, true}},
		{"downgrade past a queued writer", Downgrade, 0, []Other{ahead(Exclusive), ahead(Exclusive)}, true, []bool{false, false}},
		{"permit 2 of 2", Permit, 2, []Other{ahead(Permit), after(Permit)}, true, []bool{true, false}},
		{"permit 3 of 2", Permit, 2, []Other{ahead(Permit), ahead(Permit)}, false, []bool{true, true}},
		{"permit behind another mode", Permit, 5, []Other{ahead(Exclusive)}, false, []bool{true}},
	} {
		a := Admit(tc.mode, tc.permits)
		for i, o := range tc.others {
			if got := a.See(o); got != tc.inWay[i] {
				t.Errorf("%s: See(%+v) = %v, want %v", tc.what, o, got, tc.inWay[i])
			}
		}
		if got := a.Granted(); got != tc.granted {
			t.Errorf("%s: Granted() = %v, want %v", tc.what, got, tc.granted)
		}
	}
}
