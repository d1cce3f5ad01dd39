package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/redis/go-redis/v9"
)

// MisdeleteResult is what the misdelete drill (000 §3.1) measured.
type MisdeleteResult struct {
	LeaseMS                 float64 `json:"lease_ms"`
	NaiveDeletedForeignLock bool    `json:"naive_deleted_foreign_lock"`
	SafeDeletedForeignLock  bool    `json:"safe_deleted_foreign_lock"`
	SafeUnlockError         string  `json:"safe_unlock_error"`
	Naive                   []Event `json:"naive_timeline"`
	Safe                    []Event `json:"safe_timeline"`
	Spans                   []Span  `json:"spans"`
	points                  []Point // for the report
}

// Misdelete replays 000 §3.1's timeline twice. A takes the lock with a short
// lease, checks it is hers, stalls past the lease; B takes the expired lock;
// A releases. With GET-then-DEL, A deletes B's lock. With the Lua
// compare-and-delete release (dlock), A's Unlock reports ErrLockLost and B's
// lock is intact.
func Misdelete(ctx context.Context, r *Redis, lease time.Duration) (*MisdeleteResult, error) {
	rdb, err := r.Client()
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	res := &MisdeleteResult{LeaseMS: msf(lease)}
	name := "drill:misdelete:" + randomID()

	// Naive: SET NX PX to acquire, GET then DEL to release.
	key := "naive:{" + name + "}"
	tl := NewTimeline()
	const naiveLane, safeLane = "naive: GET then DEL", "dlock: Lua compare-and-delete"
	point := func(lane, who, label string, at time.Duration) {
		res.points = append(res.points, Point{Lane: lane, Who: who, AtMS: msf(at), Label: label})
	}
	if ok, err := rdb.SetNX(ctx, key, "token-A", lease).Result(); err != nil || !ok {
		return nil, fmt.Errorf("naive: A could not acquire: %v", err)
	}
	spanA := tl.Begin(naiveLane, "A")
	tl.Add("A", fmt.Sprintf("SET NX PX %d: acquired", lease.Milliseconds()))
	v, err := rdb.Get(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	point(naiveLane, "A", "GET: mine; stalls", tl.Add("A", fmt.Sprintf("GET = %q: \"it is mine\"; then stalls (GC pause) past the lease", v)))
	if err := sleep(ctx, lease*3/2); err != nil {
		return nil, err
	}
	if ok, err := rdb.SetNX(ctx, key, "token-B", 10*lease).Result(); err != nil || !ok {
		return nil, fmt.Errorf("naive: B could not acquire the expired lock: %v", err)
	}
	spanB := tl.Begin(naiveLane, "B")
	point(naiveLane, "B", "SET NX: takes the expired lock", tl.Add("B", "SET NX PX: acquired (A's lease had expired)"))
	n, err := rdb.Del(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	point(naiveLane, "A", "DEL: deletes B's key", tl.Add("A", fmt.Sprintf("resumes, DEL: %d key deleted (A believes it released its own lock)", n)))
	tl.End(spanA)
	after, err := rdb.Get(ctx, key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	res.NaiveDeletedForeignLock = after != "token-B"
	spanC := -1
	if ok, _ := rdb.SetNX(ctx, key, "token-C", lease).Result(); ok {
		spanC = tl.Begin(naiveLane, "C")
		point(naiveLane, "C", "SET NX: gets in beside B", tl.Add("C", "SET NX PX: acquired while B is still inside: two holders"))
	}
	tl.End(spanB)
	if spanC >= 0 {
		tl.End(spanC) // C holds until the drill removes its key
	}
	rdb.Del(ctx, key)
	res.Naive = tl.Events()

	// Safe: dlock's Mutex, Lua compare-and-delete.
	ca, err := dlock.New(rdb, dlock.WithLabel("A"))
	if err != nil {
		return nil, err
	}
	defer ca.Close()
	cb, err := dlock.New(rdb, dlock.WithLabel("B"))
	if err != nil {
		return nil, err
	}
	defer cb.Close()
	la, err := ca.Mutex(name).Acquire(ctx, dlock.LeaseTime(lease), dlock.Wait(0))
	if err != nil {
		return nil, fmt.Errorf("safe: A: %w", err)
	}
	spanA = tl.Begin(safeLane, "A")
	context.AfterFunc(la.Context(), func() { tl.End(spanA) })
	tl.Add("A", fmt.Sprintf("acquired, lease %v, token %d", lease, la.Token()))
	if err := la.Verify(ctx); err != nil {
		return nil, err
	}
	point(safeLane, "A", "Verify: mine; stalls", tl.Add("A", "Verify: it is mine; then stalls past the lease"))
	if err := sleep(ctx, lease*3/2); err != nil {
		return nil, err
	}
	if la.Err() != nil {
		tl.Add("A", "(its lease context was cancelled at the lease's end: ErrLockLost)")
	}
	lb, err := cb.Mutex(name).Acquire(ctx, dlock.Wait(lease))
	if err != nil {
		return nil, fmt.Errorf("safe: B: %w", err)
	}
	defer lb.Unlock(context.WithoutCancel(ctx))
	spanB = tl.Begin(safeLane, "B")
	tl.Add("B", fmt.Sprintf("acquired, token %d", lb.Token()))
	uerr := la.Unlock(ctx)
	if uerr == nil {
		return nil, errors.New("safe: A's unlock of an expired lock succeeded")
	}
	res.SafeUnlockError = uerr.Error()
	point(safeLane, "A", "Unlock: lock lost, deletes nothing", tl.Add("A", "resumes, Unlock: "+uerr.Error()))
	verr := lb.Verify(ctx)
	res.SafeDeletedForeignLock = verr != nil
	if verr == nil {
		point(safeLane, "B", "Verify: still mine", tl.Add("B", "Verify: still mine"))
	} else {
		point(safeLane, "B", "Verify: "+verr.Error(), tl.Add("B", "Verify: "+verr.Error()))
	}
	tl.End(spanB)
	res.Safe = tl.Events()[len(res.Naive):]
	res.Spans = tl.Spans()
	leaseEnds(res.Spans, naiveLane, "A", res.LeaseMS)
	leaseEnds(res.Spans, safeLane, "A", res.LeaseMS)
	return res, nil
}

// Report returns the drill's HTML report.
func (r *MisdeleteResult) Report() *Report {
	rep := &Report{
		Title:  "misdelete (000 §3.1): GET-then-DEL vs Lua compare-and-delete",
		Spans:  r.Spans,
		Points: r.points,
		Events: append(append([]Event(nil), r.Naive...), r.Safe...),
		Figures: [][2]string{
			{"lease", fmt.Sprintf("%.0f ms", r.LeaseMS)},
			{"GET-then-DEL deleted the foreign lock", fmt.Sprint(r.NaiveDeletedForeignLock)},
			{"Lua release deleted the foreign lock", fmt.Sprint(r.SafeDeletedForeignLock)},
			{"A's Unlock with the Lua release", r.SafeUnlockError},
		},
	}
	// The naive double grant happens within a millisecond or two: enlarge it,
	// from A's DEL's lead-up (B entering) to the end of the naive run.
	var from, to float64
	for _, s := range r.Spans {
		if s.Lane == r.naiveLane() && s.Who != "A" {
			if from == 0 || s.StartMS < from {
				from = s.StartMS
			}
			to = max(to, s.EndMS)
		}
	}
	if to > from {
		pad := max((to-from)*0.5, 0.2)
		rep.Zooms = []Window{{
			Title:  fmt.Sprintf("Enlarged: %.1f – %.1f ms of the GET-then-DEL run: B takes the expired lock, A's DEL deletes B's key, C gets in beside B", from-pad, to+pad),
			FromMS: from - pad, ToMS: to + pad,
		}}
	}
	return rep
}

// naiveLane is the lane of the GET-then-DEL run: the lane of the first span.
func (r *MisdeleteResult) naiveLane() string {
	if len(r.Spans) == 0 {
		return ""
	}
	return r.Spans[0].Lane
}

// Print writes the result for people.
func (r *MisdeleteResult) Print(w io.Writer) {
	fmt.Fprintf(w, "misdelete (000 §3.1): lease %.0f ms\n\nGET-then-DEL release:\n", r.LeaseMS)
	printEvents(w, r.Naive)
	fmt.Fprintf(w, "\nLua compare-and-delete release (dlock):\n")
	printEvents(w, r.Safe)
	fmt.Fprintf(w, "\nnaive deleted the foreign lock: %v\nsafe  deleted the foreign lock: %v\n",
		r.NaiveDeletedForeignLock, r.SafeDeletedForeignLock)
}

func printEvents(w io.Writer, es []Event) {
	for _, e := range es {
		fmt.Fprintf(w, "  %8.1f ms  %-3s %s\n", e.AtMS, e.Who, e.What)
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
