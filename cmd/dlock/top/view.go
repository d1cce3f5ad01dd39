package top

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlockgo/dlock/seam"
)

// View is what the page and /api/locks show: the last reading of the lock
// service, filtered, with what the Watcher saw happen.
type View struct {
	At      time.Time `json:"at"`      // when the view was made
	ReadAt  time.Time `json:"read_at"` // when the locks shown were read (zero: never)
	Backend string    `json:"backend"`
	Server  string    `json:"server"`
	Pattern string    `json:"pattern"`
	EveryMS int64     `json:"every_ms"`
	Filter  Filter    `json:"filter"`
	// Reachable is false while the last reading failed: then
	// UnreachableSince is the first failure and Error the last one's, and
	// Locks are the last good reading's.
	Reachable        bool       `json:"reachable"`
	UnreachableSince *time.Time `json:"unreachable_since,omitempty"`
	Error            string     `json:"error,omitempty"`
	Locks            []Lock     `json:"locks"`
	// Foreign is what was found under the prefix that is no lock: names
	// whose keys are of no lock shape on Redis, keys on etcd, nodes on
	// ZooKeeper (at most maxForeign, ForeignCount all of them).
	Foreign      []string `json:"foreign,omitempty"`
	ForeignCount int      `json:"foreign_count,omitempty"`
	Hot          []Hot    `json:"hot"`
	Events       []Event  `json:"events"` // newest first
	// Unlock says whether the page may force-unlock (--allow-unlock).
	Unlock bool `json:"unlock_allowed"`

	spans []span // for the timeline
	start time.Time
	keep  time.Duration
}

// Filter narrows a View: Name a glob over lock names, Holder a substring of
// a holder's id, host, pid or label (either "": everything).
type Filter struct {
	Name   string `json:"name,omitempty"`
	Holder string `json:"holder,omitempty"`
}

// Lock is one held lock.
type Lock struct {
	Name      string   `json:"name"`
	Shape     string   `json:"shape"`
	TTLMS     int64    `json:"ttl_ms"` // -1: none, or each holder has its own
	LastFence int64    `json:"last_fence"`
	Permits   int      `json:"permits,omitempty"`
	Holders   []Holder `json:"holders"`
	Waiters   []Waiter `json:"waiters"`
	// UnlockCommand is the `dlock unlock --force` line for this lock (""
	// on a service where a lock ends with its holder's session).
	UnlockCommand string `json:"unlock_command,omitempty"`
}

// Holder is one holder of a lock.
type Holder struct {
	ID     string     `json:"id"`
	Host   string     `json:"host,omitempty"`
	PID    int        `json:"pid,omitempty"`
	Label  string     `json:"label,omitempty"`
	Since  *time.Time `json:"since,omitempty"`
	HeldMS int64      `json:"held_ms"` // since Since (-1: unknown)
	TTLMS  int64      `json:"ttl_ms"`  // lease left (-1: none)
	// FullMS is the longest lease left seen for this hold: the TTL bar's
	// length.
	FullMS int64  `json:"full_ms"`
	Count  int    `json:"count"`
	Fence  int64  `json:"fence"`
	Mode   string `json:"mode,omitempty"`
}

// Waiter is one queued acquisition, next first.
type Waiter struct {
	ID         string `json:"id"`
	Host       string `json:"host,omitempty"`
	PID        int    `json:"pid,omitempty"`
	Label      string `json:"label,omitempty"`
	Mode       string `json:"mode,omitempty"`
	WaitedMS   int64  `json:"waited_ms"`   // -1: unknown
	DeadlineMS int64  `json:"deadline_ms"` // its place's time left; -1: as long as its session
}

// Hot is one of the busiest names of the last minute.
type Hot struct {
	Name    string `json:"name"`
	Grants  int    `json:"grants"`  // grants seen in the last minute
	Waiters int    `json:"waiters"` // the most waiters seen at once in the last minute
}

// maxEvents bounds the events a View lists; maxHot the hottest names.
const (
	maxEvents  = 100
	maxHot     = 10
	maxForeign = 20
)

// View returns what the Watcher shows now, filtered by f; unlock builds
// a lock's UnlockCommand (nil: none).
func (w *Watcher) View(f Filter, unlock func(name string) string) View {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	v := View{
		At: now, ReadAt: w.readAt, Pattern: w.o.Pattern, EveryMS: w.o.Every.Milliseconds(), Filter: f,
		Reachable: w.down.IsZero() && w.readings > 0, Error: w.lastErr,
		Locks: []Lock{}, Hot: []Hot{}, Events: []Event{}, start: w.start, keep: w.o.Keep,
	}
	if !w.down.IsZero() {
		d := w.down
		v.UnreachableSince = &d
	}
	since := now.Sub(w.readAt) // the TTLs read have run down since
	for _, info := range w.last {
		if !f.name(info.Name) {
			continue
		}
		l := Lock{Name: info.Name, Shape: info.Shape, TTLMS: left(info.TTL, since), LastFence: info.LastFence,
			Permits: info.Permits, Holders: []Holder{}, Waiters: []Waiter{}}
		match := f.Holder == ""
		for _, h := range info.Holders {
			match = match || f.holder(h.ID, h.Host, h.PID, h.Label)
			hv := Holder{ID: h.ID, Host: h.Host, PID: h.PID, Label: h.Label, HeldMS: -1, TTLMS: left(h.TTL, since),
				Count: h.Count, Fence: h.Fence, Mode: h.Mode}
			if !h.Since.IsZero() {
				s := h.Since
				hv.Since, hv.HeldMS = &s, max(0, now.Sub(s).Milliseconds())
			}
			hv.FullMS = hv.TTLMS
			if i, ok := w.open[holderKey{info.Name, h.ID, h.Fence}]; ok {
				hv.FullMS = max(hv.FullMS, w.spans[i].fullTTL.Milliseconds())
			}
			l.Holders = append(l.Holders, hv)
		}
		for _, q := range info.Queue {
			wv := Waiter{ID: q.ID, Host: q.Host, PID: q.PID, Label: q.Label, Mode: q.Mode, WaitedMS: -1, DeadlineMS: left(q.Deadline, since)}
			if !q.Since.IsZero() {
				wv.WaitedMS = max(0, now.Sub(q.Since).Milliseconds())
			}
			l.Waiters = append(l.Waiters, wv)
		}
		if !match {
			continue
		}
		if unlock != nil {
			l.UnlockCommand = unlock(info.Name)
		}
		v.Locks = append(v.Locks, l)
	}
	for _, name := range w.foreign {
		if f.name(name) {
			if v.ForeignCount++; len(v.Foreign) < maxForeign {
				v.Foreign = append(v.Foreign, name)
			}
		}
	}
	for name, ts := range w.grants {
		if f.name(name) {
			v.Hot = append(v.Hot, Hot{Name: name, Grants: len(ts), Waiters: w.waiters[name]})
		}
	}
	for name, n := range w.waiters {
		if _, ok := w.grants[name]; !ok && n > 0 && f.name(name) {
			v.Hot = append(v.Hot, Hot{Name: name, Waiters: n})
		}
	}
	slices.SortFunc(v.Hot, func(a, b Hot) int {
		return cmp.Or(cmp.Compare(b.Grants+b.Waiters, a.Grants+a.Waiters), strings.Compare(a.Name, b.Name))
	})
	v.Hot = v.Hot[:min(len(v.Hot), maxHot)]
	for i := len(w.events) - 1; i >= 0 && len(v.Events) < maxEvents; i-- {
		if e := w.events[i]; f.name(e.Name) && (f.Holder == "" || strings.Contains(e.Holder, f.Holder)) {
			v.Events = append(v.Events, e)
		}
	}
	for _, s := range w.spans {
		if f.name(s.key.name) && (f.Holder == "" || strings.Contains(s.who, f.Holder)) {
			v.spans = append(v.spans, s)
		}
	}
	return v
}

// left returns what is left of d after since, in ms; -1 for none.
func left(d, since time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return max(0, (d - since).Milliseconds())
}

// name reports whether the filter keeps the lock called name.
func (f Filter) name(name string) bool {
	return f.Name == "" || seam.MatchGlob(f.Name, name)
}

// holder reports whether the filter keeps a holder.
func (f Filter) holder(id, host string, pid int, label string) bool {
	if f.Holder == "" {
		return true
	}
	for _, s := range []string{id, host, label} {
		if strings.Contains(s, f.Holder) {
			return true
		}
	}
	return pid > 0 && strings.Contains(host+":"+strconv.Itoa(pid), f.Holder)
}
