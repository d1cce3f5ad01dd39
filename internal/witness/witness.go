// Package witness records who is inside a critical section so tests can
// count mutual-exclusion violations independently of the lock under test.
package witness

import "sync"

// Witness counts overlaps: an Enter on a key while another holder is inside
// it. Readers (EnterShared) may overlap each other but not a writer.
// It is safe for concurrent use; the zero value is ready.
type Witness struct {
	mu       sync.Mutex
	inside   map[string]int // writers inside, per key
	shared   map[string]int // readers inside, per key
	entries  int
	overlaps int
	maxIn    map[string]int
}

func (w *Witness) init() {
	if w.inside == nil {
		w.inside, w.shared, w.maxIn = map[string]int{}, map[string]int{}, map[string]int{}
	}
}

// Enter records an exclusive holder entering key.
func (w *Witness) Enter(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	w.entries++
	if w.inside[key] > 0 || w.shared[key] > 0 {
		w.overlaps++
	}
	w.inside[key]++
	w.maxIn[key] = max(w.maxIn[key], w.inside[key]+w.shared[key])
}

// Exit records an exclusive holder leaving key.
func (w *Witness) Exit(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.inside[key]--
}

// EnterShared records a shared holder (reader, permit) entering key; it
// overlaps only an exclusive holder.
func (w *Witness) EnterShared(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.init()
	w.entries++
	if w.inside[key] > 0 {
		w.overlaps++
	}
	w.shared[key]++
	w.maxIn[key] = max(w.maxIn[key], w.inside[key]+w.shared[key])
	return w.shared[key]
}

// ExitShared records a shared holder leaving key.
func (w *Witness) ExitShared(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.shared[key]--
}

// Overlaps returns how many entries found a conflicting holder inside.
func (w *Witness) Overlaps() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.overlaps
}

// Entries returns how many entries were recorded.
func (w *Witness) Entries() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.entries
}

// MaxInside returns the most holders (of any kind) seen inside key at once.
func (w *Witness) MaxInside(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.maxIn[key]
}
