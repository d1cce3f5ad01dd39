package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Progress timing: nothing is shown for a part of a run (one strategy's
// sale) until it has run progressDelay; then a terminal's bar is redrawn at
// most every progressTTY, other writers get a plain line every progressLine.
const (
	progressDelay = 2 * time.Second
	progressTTY   = 100 * time.Millisecond
	progressLine  = 5 * time.Second
)

// progress shows how far a long run is on stderr: a bar redrawn in place
// on a terminal, a line now and then elsewhere (a log, a pipe). It is safe
// for concurrent use.
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	on, tty bool
	what    string    // the part being run
	start   time.Time // the part's first update
	last    time.Time // the last drawing
	drawn   bool      // a bar is on the terminal's line
	lined   bool      // the part has had a line (not a terminal)
	now     func() time.Time
}

// newProgress returns a progress display on w, or one that shows nothing
// when not enabled.
func newProgress(w io.Writer, enabled bool) *progress {
	tty := false
	if f, ok := w.(*os.File); ok {
		st, err := f.Stat()
		tty = err == nil && st.Mode()&os.ModeCharDevice != 0
	}
	return &progress{w: w, on: enabled, tty: tty, now: time.Now}
}

// update reports done of total for the part of the run called what.
func (p *progress) update(what string, done, total int) {
	if !p.on {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if what != p.what || p.start.IsZero() {
		p.what, p.start, p.last, p.lined = what, now, time.Time{}, false
	}
	elapsed := now.Sub(p.start)
	if elapsed < progressDelay {
		return
	}
	every := progressLine
	if p.tty {
		every = progressTTY
	}
	// The end of a part is drawn on a terminal, and in a line if the part
	// had a line already.
	last := done == total && (p.tty || p.lined)
	if now.Sub(p.last) < every && !last {
		return
	}
	p.last = now
	pct := done * 100 / max(total, 1)
	if !p.tty {
		fmt.Fprintf(p.w, "%s: %d/%d (%d%%), %s elapsed\n", what, done, total, pct, elapsed.Round(time.Second))
		p.lined = true
		return
	}
	n := pct * 30 / 100
	fmt.Fprintf(p.w, "\r%-12s [%s%s] %d/%d %3d%% %s", what, strings.Repeat("#", n), strings.Repeat(".", 30-n), done, total, pct, elapsed.Round(time.Second))
	p.drawn = true
}

// finish clears the terminal's bar.
func (p *progress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
		p.drawn = false
	}
}
