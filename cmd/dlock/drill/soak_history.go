package drill

import (
	"bufio"
	"cmp"
	"encoding/json"
	"io"
	"slices"
	"time"
)

// The operations of a HistoryEvent.
const (
	OpAcquire     = "acquire"      // Acquire: invoke, then granted or refused
	OpLost        = "lost"         // the holder was told its lease was lost: signal
	OpRelease     = "release"      // Unlock: invoke, then returned
	OpFencedWrite = "fenced-write" // the fenced write: invoke, then accepted or rejected (or error)
	OpPlainWrite  = "plain-write"  // the unchecked read-then-write: invoke, then returned
	OpRead        = "read"         // the final read of the fenced register: invoke, then returned
)

// The events of a HistoryEvent: an invocation, or how it completed.
const (
	EvInvoke   = "invoke"
	EvGranted  = "granted"
	EvRefused  = "refused"
	EvSignal   = "signal"
	EvReturned = "returned"
	EvAccepted = "accepted"
	EvRejected = "rejected"
)

// HistoryEvent is one line of the soak's --history file (docs/DRILLS.md,
// "The history file"). Every operation is an invoke event followed, on the
// same client, by its completion, except a loss signal, which is one event.
// A client does one operation at a time.
type HistoryEvent struct {
	T      int64  `json:"t_ns"`   // monotonic: ns since the run's start
	Wall   string `json:"wall"`   // wall clock, RFC 3339 with ns, UTC
	Client string `json:"client"` // w0, w1, …; "reader" for the final reads
	Name   string `json:"name"`   // the lock name
	Op     string `json:"op"`     // OpAcquire, …
	Event  string `json:"event"`  // EvInvoke, …
	// Token is the fencing token granted, held, written or read (0 on an
	// invocation of Acquire and on a refusal).
	Token int64 `json:"token"`
	// Result is "ok" or the error of a completion (a refused Acquire's,
	// a failed Unlock's, a store error); empty on an invocation.
	Result string `json:"result,omitempty"`
	// HeldNS, on a loss signal, is the last time the holder saw its lease
	// held: the loss happened in (HeldNS, T].
	HeldNS int64 `json:"held_ns,omitempty"`
}

// event records one event of the history at t on the soak's clock (only
// under o.History).
func (s *soak) event(t time.Duration, who, name, op, ev string, token int64, err error) {
	if !s.o.History {
		return
	}
	e := HistoryEvent{T: int64(t), Client: who, Name: name, Op: op, Event: ev, Token: token}
	if ev != EvInvoke {
		e.Result = "ok"
		if err != nil {
			e.Result = err.Error()
		}
	}
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
}

// lostEvent records a loss signal seen at t, the lease last seen held at
// held (only under o.History).
func (s *soak) lostEvent(t, held time.Duration, who, name string, token int64) {
	if !s.o.History {
		return
	}
	s.mu.Lock()
	s.events = append(s.events, HistoryEvent{T: int64(t), Client: who, Name: name, Op: OpLost, Event: EvSignal,
		Token: token, Result: "ok", HeldNS: int64(held)})
	s.mu.Unlock()
}

// WriteHistory writes every event of the soak, ordered by time (a client's
// events in the order it made them), one JSON object a line: none unless
// the soak ran with SoakOptions.History.
func (r *SoakResult) WriteHistory(w io.Writer) error {
	events := slices.Clone(r.events)
	slices.SortStableFunc(events, func(a, b HistoryEvent) int { return cmp.Compare(a.T, b.T) })
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, e := range events {
		e.Wall = r.start.Add(time.Duration(e.T)).UTC().Format(time.RFC3339Nano)
		if err := enc.Encode(e); err != nil {
			return err
		}
	}
	return bw.Flush()
}
