package drill

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
)

// MisdeleteResult is what the misdelete drill (000 §3.1) measured.
type MisdeleteResult struct {
	LeaseMS                 float64 `json:"lease_ms"`
	NaiveDeletedForeignLock bool    `json:"naive_deleted_foreign_lock"`
	SafeDeletedForeignLock  bool    `json:"safe_deleted_foreign_lock"`
	SafeUnlockError         string  `json:"safe_unlock_error"`
	// NaiveDoubleGrants and SafeDoubleGrants count the holders who entered
	// while another was inside, in each run (from the spans).
	NaiveDoubleGrants int     `json:"naive_double_grants"`
	SafeDoubleGrants  int     `json:"safe_double_grants"`
	Naive             []Event `json:"naive_timeline"`
	Safe              []Event `json:"safe_timeline"`
	history
}

// The misdelete drill's lanes: the GET-then-DEL run and the dlock run.
const (
	naiveLane = "naive: GET then DEL"
	safeLane  = "dlock: Lua compare-and-delete"
)

// Misdelete replays 000 §3.1's timeline twice. A takes the lock with a short
// lease, checks it is hers, stalls past the lease; B takes the expired lock;
// A releases. With GET-then-DEL, A deletes B's lock. With the Lua
// compare-and-delete release (dlock), A's Unlock reports ErrLockLost and B's
// lock is intact.
func Misdelete(ctx context.Context, r *backend.Backend, lease time.Duration) (*MisdeleteResult, error) {
	rdb, err := r.RedisClient()
	if err != nil {
		return nil, err
	}
	defer rdb.Close()
	res := &MisdeleteResult{LeaseMS: msf(lease)}
	name := "drill:misdelete:" + randomID()

	// Naive: SET NX PX to acquire, GET then DEL to release.
	key := "naive:{" + name + "}"
	tl := NewTimeline()
	if ok, err := rdb.SetNX(ctx, key, "token-A", lease).Result(); err != nil || !ok {
		return nil, fmt.Errorf("naive: A could not acquire: %v", err)
	}
	spanA := tl.Enter(naiveLane, "A", fmt.Sprintf("SET NX PX %d: acquired", lease.Milliseconds()))
	v, err := rdb.Get(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	tl.Point(naiveLane, "A", "GET: mine; stalls", tl.Add("A", fmt.Sprintf("GET = %q: \"it is mine\"; then stalls (GC pause) past the lease", v)))
	if err := sleep(ctx, lease*3/2); err != nil {
		return nil, err
	}
	if ok, err := rdb.SetNX(ctx, key, "token-B", 10*lease).Result(); err != nil || !ok {
		return nil, fmt.Errorf("naive: B could not acquire the expired lock: %v", err)
	}
	spanB := tl.Enter(naiveLane, "B", "SET NX PX: acquired (A's lease had expired)")
	tl.Point(naiveLane, "B", "SET NX: takes the expired lock", tl.Since())
	n, err := rdb.Del(ctx, key).Result()
	if err != nil {
		return nil, err
	}
	tl.Point(naiveLane, "A", "DEL: deletes B's key", tl.Add("A", fmt.Sprintf("resumes, DEL: %d key deleted (A believes it released its own lock)", n)))
	tl.End(spanA)
	after, err := rdb.Get(ctx, key).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	res.NaiveDeletedForeignLock = after != "token-B"
	spanC := -1
	if ok, _ := rdb.SetNX(ctx, key, "token-C", lease).Result(); ok {
		spanC = tl.Enter(naiveLane, "C", "SET NX PX: acquired")
		tl.Point(naiveLane, "C", "SET NX: gets in", tl.Since())
	}
	tl.End(spanB)
	if spanC >= 0 {
		tl.End(spanC) // C holds until the drill removes its key
	}
	rdb.Del(ctx, key)
	res.Naive = tl.Events()

	// Safe: dlock's Mutex, Lua compare-and-delete.
	ca, err := dlock.New(rdb, dlock.Config{Label: "A"})
	if err != nil {
		return nil, err
	}
	defer ca.Close()
	cb, err := dlock.New(rdb, dlock.Config{Label: "B"})
	if err != nil {
		return nil, err
	}
	defer cb.Close()
	la, err := ca.Mutex(name).Acquire(ctx, dlock.LeaseTime(lease), dlock.Wait(0))
	if err != nil {
		return nil, fmt.Errorf("safe: A: %w", err)
	}
	spanA = tl.Enter(safeLane, "A", fmt.Sprintf("acquired, lease %v, token %d", lease, la.Token()))
	context.AfterFunc(la.Context(), func() { tl.End(spanA) })
	if err := la.Verify(ctx); err != nil {
		return nil, err
	}
	tl.Point(safeLane, "A", "Verify: mine; stalls", tl.Add("A", "Verify: it is mine; then stalls past the lease"))
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
	spanB = tl.Enter(safeLane, "B", fmt.Sprintf("acquired, token %d", lb.Token()))
	uerr := la.Unlock(ctx)
	if uerr == nil {
		return nil, errors.New("safe: A's unlock of an expired lock succeeded")
	}
	res.SafeUnlockError = uerr.Error()
	tl.Point(safeLane, "A", "Unlock: lock lost, deletes nothing", tl.Add("A", "resumes, Unlock: "+errText(uerr)))
	verr := lb.Verify(ctx)
	res.SafeDeletedForeignLock = verr != nil
	if verr == nil {
		tl.Point(safeLane, "B", "Verify: still mine", tl.Add("B", "Verify: still mine"))
	} else {
		tl.Point(safeLane, "B", "Verify: "+errText(verr), tl.Add("B", "Verify: "+errText(verr)))
	}
	tl.End(spanB)
	res.Safe = tl.Events()[len(res.Naive):]
	res.history = tl.history()
	res.fromHistory()
	return res, nil
}

// fromHistory sets what the result reads from its spans.
func (r *MisdeleteResult) fromHistory() {
	leaseEnds(r.Spans, naiveLane, "A", r.LeaseMS)
	leaseEnds(r.Spans, safeLane, "A", r.LeaseMS)
	r.NaiveDoubleGrants = DoubleGrants(lane(r.Spans, naiveLane))
	r.SafeDoubleGrants = DoubleGrants(lane(r.Spans, safeLane))
}

// Summary returns what the text and the HTML report show.
func (r *MisdeleteResult) Summary() *Summary {
	s := &Summary{
		Title: fmt.Sprintf("misdelete (000 §3.1): GET-then-DEL vs Lua compare-and-delete, lease %.0f ms", r.LeaseMS),
		Parts: []Part{{"GET-then-DEL release", r.Naive}, {"Lua compare-and-delete release (dlock)", r.Safe}},
		Figures: []Figure{
			{"GET-then-DEL deleted the foreign lock", fmt.Sprint(r.NaiveDeletedForeignLock)},
			{"GET-then-DEL: holders who got in beside another", fmt.Sprint(r.NaiveDoubleGrants)},
			{"Lua release deleted the foreign lock", fmt.Sprint(r.SafeDeletedForeignLock)},
			{"Lua release: holders who got in beside another", fmt.Sprint(r.SafeDoubleGrants)},
			{"A's Unlock with the Lua release", r.SafeUnlockError},
		},
		Spans: r.Spans, Points: r.points,
	}
	// The naive run's later holders come and go within a millisecond or
	// two: enlarge them, from B entering to the end of the run.
	var from, to float64
	var entries []string
	for i, sp := range r.Spans {
		if sp.Lane != naiveLane || sp.Who == "A" {
			continue
		}
		if from == 0 || sp.StartMS < from {
			from = sp.StartMS
		}
		to = max(to, sp.EndMS)
		e := sp.Who + " enters"
		if note := entryNote(r.Spans, i); note != "" {
			e += " (" + note + ")"
		}
		entries = append(entries, e)
	}
	if to > from {
		pad := max((to-from)*0.5, 0.2)
		s.Zooms = []Window{{
			Title:  fmt.Sprintf("Enlarged: %.1f – %.1f ms of the GET-then-DEL run: %s", from-pad, to+pad, strings.Join(entries, "; ")),
			FromMS: from - pad, ToMS: to + pad,
		}}
	}
	return s
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
