package witness

import (
	"sync"

	"github.com/dlockgo/dlock/observe"
)

// Losses is an Observer that counts the losses its Clients report, by
// reason. It is safe for concurrent use; the zero value is ready.
type Losses struct {
	observe.Nop
	mu sync.Mutex
	by map[observe.LostReason]int
}

func (o *Losses) ObserveLost(e observe.LostEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.by == nil {
		o.by = map[observe.LostReason]int{}
	}
	o.by[e.Reason]++
}

// Count returns how many losses were reported with reason.
func (o *Losses) Count(reason observe.LostReason) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.by[reason]
}
