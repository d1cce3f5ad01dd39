package top

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	dl "github.com/dlockgo/dlock"
)

// Source is what the view reads: the held locks whose names match a glob,
// as every backend client's List returns them. A Source that also has a
// method Foreign() []string (dlock.Lister and every backend's Lister)
// tells what its last List found under the prefix that is no lock (on
// Redis names whose keys are of no lock shape, on etcd keys, on ZooKeeper
// nodes): the view shows them as such.
type Source interface {
	List(ctx context.Context, pattern string) ([]dl.Info, error)
}

// foreignTeller is a Source that tells what is no lock.
type foreignTeller interface {
	Foreign() []string
}

// Options are a Watcher's settings.
type Options struct {
	Pattern string        // the names to list (a glob; "" all)
	Every   time.Duration // how often to read the lock service
	Keep    time.Duration // how much history the timeline keeps (and draws)
	Timeout time.Duration // the bound of one read (0: Every, at least 1 s)
}

// hotWindow is the stretch over which the hottest names are counted.
const hotWindow = time.Minute

// Watcher reads a Source again and again and keeps what the view shows:
// the last reading, the grants, releases and expiries it saw between
// readings, and since when the service is unreachable. It only reads: it
// never writes to the lock service. It is safe for concurrent use.
type Watcher struct {
	src   Source
	o     Options
	start time.Time

	mu      sync.Mutex
	last    []dl.Info              // the last good reading
	foreign []string               // what it found that is no lock
	readAt  time.Time              // when it was read
	seen    map[holderKey]seen     // the holders of the last good reading
	spare   map[holderKey]seen     // the map of the reading before, cleared: the next reading's
	events  []Event                // oldest first, trimmed to Keep
	open    map[holderKey]int      // the index in spans of each open hold
	spans   []span                 // holds seen, oldest first, trimmed to Keep
	grants  map[string][]time.Time // per name, the grants of the last hotWindow
	waiters map[string]int         // per name, the most waiters seen within hotWindow
	waitAt  map[string]time.Time   // when that most was seen
	// firstGrant is, per name, the earliest exclusive grant the reading
	// being recorded saw: a hold gone in it ended no later.
	firstGrant map[string]time.Time
	down       time.Time // unreachable since (zero: reachable)
	lastErr    string
	readings   int
	subs       map[chan struct{}]struct{}
}

// holderKey names one grant: a lock and the holder's id and token.
type holderKey struct {
	name, id string
	fence    int64
}

// seen is what the last reading said of one holder.
type seen struct {
	h  *dl.Holder // in the reading's Info
	at time.Time  // when the reading that saw it started
}

// span is one hold as the view saw it.
type span struct {
	key      holderKey
	who      string
	from, to time.Time     // to zero: still held
	expired  bool          // it ended by running out its lease (or session), not by a release
	fullTTL  time.Duration // the longest lease left seen: its bar's length
}

// Event is a grant, release or expiry the view saw.
type Event struct {
	At     time.Time `json:"at"`
	Name   string    `json:"name"`
	Kind   string    `json:"kind"` // "granted", "released" or "expired"
	Holder string    `json:"holder"`
	Fence  int64     `json:"fence,omitempty"`
}

// NewWatcher returns a Watcher of src; Run makes it read.
func NewWatcher(src Source, o Options) *Watcher {
	if o.Every <= 0 {
		o.Every = time.Second
	}
	if o.Keep <= 0 {
		o.Keep = 5 * time.Minute
	}
	if o.Timeout <= 0 {
		o.Timeout = max(o.Every, time.Second)
	}
	return &Watcher{
		src: src, o: o, start: time.Now(),
		seen: map[holderKey]seen{}, open: map[holderKey]int{},
		grants: map[string][]time.Time{}, waiters: map[string]int{}, waitAt: map[string]time.Time{}, firstGrant: map[string]time.Time{},
		subs: map[chan struct{}]struct{}{},
	}
}

// Run reads the source every Options.Every until ctx ends. A failed read
// marks the service unreachable (since the first failure) and keeps the
// last good reading; the next good one clears it.
func (w *Watcher) Run(ctx context.Context) {
	t := time.NewTicker(w.o.Every)
	defer t.Stop()
	for {
		w.Read(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Read reads the source once and records what changed.
func (w *Watcher) Read(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, w.o.Timeout)
	started := time.Now()
	infos, err := w.src.List(rctx, w.o.Pattern)
	cancel()
	if ctx.Err() != nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	w.readings++
	if err != nil {
		if w.down.IsZero() {
			w.down = now
		}
		w.lastErr = err.Error()
	} else {
		w.down, w.lastErr = time.Time{}, ""
		w.record(infos, started, now)
		if f, ok := w.src.(foreignTeller); ok {
			w.foreign = f.Foreign()
		}
	}
	w.trim(now)
	subs := make([]chan struct{}, 0, len(w.subs))
	for ch := range w.subs {
		subs = append(subs, ch)
	}
	w.mu.Unlock()
	for _, ch := range subs {
		select {
		case ch <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// record compares a good reading, started at started and read by now,
// with the last one: a holder that appears was granted; one that is gone
// expired if its lease may have run out by now (the TTL it had when the
// last reading started, which it read later, has passed), else it was
// released.
func (w *Watcher) record(infos []dl.Info, started, now time.Time) {
	next := w.spare
	if next == nil {
		next = make(map[holderKey]seen, len(w.seen))
	}
	clear(w.firstGrant)
	firstEvent := len(w.events)
	for _, info := range infos {
		for j := range info.Holders {
			h := &info.Holders[j]
			k := holderKey{info.Name, h.ID, h.Fence}
			next[k] = seen{h, started}
			if _, ok := w.seen[k]; ok {
				if i, ok := w.open[k]; ok {
					w.spans[i].fullTTL = max(w.spans[i].fullTTL, h.TTL)
				}
				continue
			}
			at := now
			if !h.Since.IsZero() && h.Since.After(w.readAt) && h.Since.Before(now) {
				at = h.Since
			}
			if w.readings > 1 || !h.Since.IsZero() {
				w.grants[info.Name] = append(w.grants[info.Name], at)
			}
			if w.readings > 1 {
				w.events = append(w.events, Event{At: at, Name: info.Name, Kind: "granted", Holder: holderName(*h), Fence: h.Fence})
			}
			from := at
			if w.readings == 1 && !h.Since.IsZero() && h.Since.Before(now) {
				from = h.Since
			}
			w.open[k] = len(w.spans)
			w.spans = append(w.spans, span{key: k, who: holderName(*h), from: from, fullTTL: h.TTL})
			if g := w.firstGrant[info.Name]; h.Mode != "read" && info.Shape != "semaphore" && (g.IsZero() || at.Before(g)) {
				w.firstGrant[info.Name] = at // an exclusive grant
			}
		}
		if n := len(info.Queue); n >= w.waiters[info.Name] || now.Sub(w.waitAt[info.Name]) > hotWindow {
			if n > 0 || w.waiters[info.Name] > 0 {
				w.waiters[info.Name], w.waitAt[info.Name] = n, now
			}
		}
	}
	for k, s := range w.seen {
		if _, ok := next[k]; ok {
			continue
		}
		kind := "released"
		if s.h.TTL >= 0 && now.Sub(s.at) >= s.h.TTL {
			kind = "expired"
		}
		// It ended before now, and before an exclusive grant of its lock
		// seen in this reading.
		end := now
		if g := w.firstGrant[k.name]; !g.IsZero() && g.After(w.readAt) && g.Before(end) {
			end = g
		}
		w.events = append(w.events, Event{At: end, Name: k.name, Kind: kind, Holder: holderName(*s.h), Fence: k.fence})
		if i, ok := w.open[k]; ok {
			if end.Before(w.spans[i].from) {
				end = w.spans[i].from
			}
			w.spans[i].to, w.spans[i].expired = end, kind == "expired"
			delete(w.open, k)
		}
	}
	// This reading's events in time order after the ones before it.
	slices.SortStableFunc(w.events[firstEvent:], func(a, b Event) int { return a.At.Compare(b.At) })
	clear(w.seen)
	w.seen, w.spare, w.last, w.readAt = next, w.seen, infos, now
}

// trim forgets what is older than the history kept.
func (w *Watcher) trim(now time.Time) {
	old := now.Add(-w.o.Keep)
	i := 0
	for i < len(w.events) && w.events[i].At.Before(old) {
		i++
	}
	w.events = slices.Delete(w.events, 0, i)
	kept := w.spans[:0]
	for _, s := range w.spans {
		if !s.to.IsZero() && s.to.Before(old) {
			continue
		}
		kept = append(kept, s)
	}
	clear(w.spans[len(kept):])
	w.spans = kept
	clear(w.open)
	for i, s := range w.spans {
		if s.to.IsZero() {
			w.open[s.key] = i
		}
	}
	hot := now.Add(-hotWindow)
	for name, ts := range w.grants {
		j := 0
		for j < len(ts) && ts[j].Before(hot) {
			j++
		}
		if ts = ts[j:]; len(ts) == 0 {
			delete(w.grants, name)
		} else {
			w.grants[name] = ts
		}
	}
	for name, at := range w.waitAt {
		if at.Before(hot) {
			delete(w.waiters, name)
			delete(w.waitAt, name)
		}
	}
}

// Subscribe returns a channel that receives a value after each reading
// (readings while one is pending are folded into it), and a function that
// ends the subscription.
func (w *Watcher) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	w.subs[ch] = struct{}{}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.subs, ch)
		w.mu.Unlock()
	}
}

// holderName is how the view names a holder in its events and timeline
// rows: its label (if any), id, and host:pid where the store keeps them.
func holderName(h dl.Holder) string {
	s := h.ID
	if h.Label != "" {
		s = h.Label + " " + s
	}
	if h.PID > 0 {
		s += " :" + strconv.Itoa(h.PID)
	}
	return s
}
