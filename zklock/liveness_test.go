package zklock

import (
	"testing"
	"time"
)

// TestLivenessProves: a sync proves the candidates answered a relay or
// more before it was sent, not the later ones; the proven send time only
// moves forward; a new session starts over.
func TestLivenessProves(t *testing.T) {
	var v liveness
	const sid, relay = 7, 100 * time.Millisecond
	t0 := time.Now()
	v.answered(sid, t0, 0) // answered now, about t0
	if _, moved := v.prove(sid, time.Now(), relay); moved {
		t.Fatal("a sync sent just after a candidate's answer proved it")
	}
	time.Sleep(relay)
	t1 := time.Now()
	v.answered(sid, t1, 0)
	base, moved := v.prove(sid, time.Now(), relay)
	if !moved || !base.Equal(t0) {
		t.Fatalf("proved %v (moved %v), want the first candidate's send time", base.Sub(t0), moved)
	}
	if at, ok := v.latest(sid); !ok || at.Before(t1) {
		t.Fatalf("the second candidate is not pending: %v %v", at, ok)
	}
	time.Sleep(relay)
	if base, moved = v.prove(sid, time.Now(), relay); !moved || !base.Equal(t1) {
		t.Fatalf("proved %v (moved %v), want the second candidate's", base.Sub(t0), moved)
	}
	if base, moved = v.prove(sid, time.Now(), relay); moved || !base.Equal(t1) {
		t.Fatalf("nothing new to prove, but it moved to %v", base.Sub(t0))
	}
	if _, ok := v.latest(sid); ok {
		t.Fatal("a candidate is still pending after all were proven")
	}
	// Another session: the old one's proof does not count.
	v.answered(sid+1, time.Now(), 0)
	if base, _ := v.prove(sid+1, time.Now().Add(time.Second), relay); !base.After(t1) {
		t.Fatalf("the new session's proof %v is the old one's", base.Sub(t0))
	}
	if _, ok := v.latest(sid); ok {
		t.Fatal("the old session still has candidates")
	}
}

// TestLivenessMerges: candidates answered within the merge window are one
// (the later send time), so the list stays short.
func TestLivenessMerges(t *testing.T) {
	var v liveness
	const sid = 1
	t0 := time.Now()
	for i := range 1000 {
		v.answered(sid, t0.Add(time.Duration(i)*time.Microsecond), time.Hour)
	}
	if len(v.cands) != 1 {
		t.Fatalf("%d candidates, want 1", len(v.cands))
	}
	base, _ := v.prove(sid, time.Now().Add(time.Second), time.Millisecond)
	if want := t0.Add(999 * time.Microsecond); !base.Equal(want) {
		t.Fatalf("proved %v, want the latest send time", base.Sub(t0))
	}
}

// TestLivenessSpans: the spans of the argument in liveness.go.
func TestLivenessSpans(t *testing.T) {
	const T = 12 * time.Second
	if relay(T) != 3*time.Second || firstSpan(T) != 5*time.Second || reach(T) != 8*time.Second {
		t.Fatalf("relay %v, first span %v, reach %v of a %v session", relay(T), firstSpan(T), reach(T), T)
	}
}

// TestLivenessStream: a stream of requests, each answered within the
// merge window of the one before, is merged one window at a time: the
// first window's candidate is provable a relay after that window, however
// long the stream goes on.
func TestLivenessStream(t *testing.T) {
	var v liveness
	const sid, merge, relay = 1, 20 * time.Millisecond, 30 * time.Millisecond
	for t0 := time.Now(); time.Since(t0) < 10*merge; {
		v.answered(sid, time.Now(), merge)
		time.Sleep(merge / 10)
	}
	if len(v.cands) < 5 {
		t.Fatalf("%d candidates for a stream of 10 merge windows", len(v.cands))
	}
	first := v.cands[0].first
	at, ok := v.provable(sid, relay)
	if !ok || !at.Before(first.Add(merge+relay)) {
		t.Fatalf("the stream's first candidate is provable %v after it began (%v), want within a window and a relay", at.Sub(first), ok)
	}
	if base, moved := v.prove(sid, at, relay); !moved || !base.Before(first.Add(merge)) {
		t.Fatalf("a sync sent when it is provable proved %v after the stream began (moved %v)", base.Sub(first), moved)
	}
}
