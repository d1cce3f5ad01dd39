package top

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	dl "github.com/dlockgo/dlock"
)

// script is a Source that answers what the test last set: the diff logic
// is the Watcher's own, whatever service the readings come from.
type script struct {
	mu    sync.Mutex
	infos []dl.Info
	err   error
}

func (s *script) set(err error, infos ...dl.Info) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.infos, s.err = infos, err
}

func (s *script) List(ctx context.Context, pattern string) ([]dl.Info, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.infos, s.err
}

func held(name string, ttl time.Duration, hs ...dl.Holder) dl.Info {
	return dl.Info{Name: name, Shape: "mutex", Held: true, Holders: hs, TTL: ttl}
}

// A holder that appears is granted; one gone with lease left was
// released; one gone after its lease ran out expired. The view keeps the
// last good reading while the source fails, and says since when.
func TestWatcherHistory(t *testing.T) {
	src := &script{}
	w := NewWatcher(src, Options{Every: time.Second})
	ctx := context.Background()
	a := dl.Holder{ID: "aaaa", Host: "h", PID: 1, Fence: 1, TTL: 30 * time.Second}
	b := dl.Holder{ID: "bbbb", Host: "h", PID: 2, Fence: 2, TTL: 0} // its lease has run out when read
	w.Read(ctx)                                                     // nothing held
	src.set(nil, held("x", a.TTL, a), held("y", b.TTL, b))
	w.Read(ctx)
	src.set(nil)
	w.Read(ctx)
	v := w.View(Filter{}, nil)
	var got []string
	for _, e := range v.Events {
		got = append(got, e.Name+" "+e.Kind+" "+e.Holder)
	}
	want := []string{"x released aaaa :1", "y expired bbbb :2", "x granted aaaa :1", "y granted bbbb :2"}
	slicesEqualSet(t, got[:2], want[:2])
	slicesEqualSet(t, got[2:], want[2:])
	svg := string(v.Timeline())
	for _, name := range []string{"x", "y"} {
		if !strings.Contains(svg, ">"+name+"</text>") {
			t.Errorf("timeline has no lane %s", name)
		}
	}
	if bars := strings.Count(svg, `class="bar"`); bars != 2 {
		t.Errorf("%d bars, want 2", bars)
	}
	// Each hold runs from its grant to its end: the readings that saw them.
	at := map[string]time.Time{}
	for _, e := range v.Events {
		at[e.Name+" "+e.Kind] = e.At
	}
	for _, sp := range v.spans {
		start, end := at[sp.key.name+" granted"], at[sp.key.name+" released"]
		if end.IsZero() {
			end = at[sp.key.name+" expired"]
		}
		if !sp.from.Equal(start) || !sp.to.Equal(end) || !end.After(start) {
			t.Errorf("%s held %v – %v, want %v – %v", sp.key.name, sp.from, sp.to, start, end)
		}
	}

	// A hold handed on between two readings ends, as drawn, where the next
	// one's grant began (its Since), not at the reading that saw it gone.
	c := dl.Holder{ID: "cccc", Host: "h", PID: 3, Fence: 3, TTL: 30 * time.Second}
	src.set(nil, held("x", c.TTL, c))
	w.Read(ctx)
	d := dl.Holder{ID: "dddd", Host: "h", PID: 4, Fence: 4, TTL: 30 * time.Second}
	d.Since = time.Now() // after the reading before, before the next
	src.set(nil, held("x", d.TTL, d))
	w.Read(ctx)
	w.mu.Lock()
	for _, sp := range w.spans {
		if sp.key.id == "cccc" && !sp.to.Equal(d.Since) {
			t.Errorf("the hold handed on ends at %v, want the next grant's %v", sp.to, d.Since)
		}
	}
	w.mu.Unlock()

	src.set(errors.New("connection refused"))
	w.Read(ctx)
	v = w.View(Filter{}, nil)
	if v.Reachable || v.UnreachableSince == nil || !strings.Contains(v.Error, "refused") {
		t.Errorf("after a failed read: reachable %v since %v error %q", v.Reachable, v.UnreachableSince, v.Error)
	}
	src.set(nil, held("z", a.TTL, a))
	w.Read(ctx)
	if v = w.View(Filter{}, nil); !v.Reachable || v.UnreachableSince != nil || len(v.Locks) != 1 {
		t.Errorf("after a good read: reachable %v since %v locks %d", v.Reachable, v.UnreachableSince, len(v.Locks))
	}
	if v = w.View(Filter{Name: "q*"}, nil); len(v.Locks) != 0 {
		t.Errorf("filter q*: %d locks", len(v.Locks))
	}
	if v = w.View(Filter{Holder: "aaaa"}, nil); len(v.Locks) != 1 {
		t.Errorf("filter holder aaaa: %d locks", len(v.Locks))
	}
}

func slicesEqualSet(t *testing.T, got, want []string) {
	t.Helper()
	m := map[string]int{}
	for _, s := range got {
		m[s]++
	}
	for _, s := range want {
		m[s]--
	}
	for s, n := range m {
		if n != 0 {
			t.Errorf("events %q, want %q (%s)", got, want, s)
			return
		}
	}
}
