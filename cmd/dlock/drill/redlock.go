package drill

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlockgo/dlock/internal/freeport"

	"github.com/redis/go-redis/v9"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/fence"
	"github.com/dlockgo/dlock/internal/redisproc"
)

// RedLockResult is what the redlock drill (000 §2.8) measured.
type RedLockResult struct {
	Nodes       int     `json:"nodes"`
	LeaseMS     float64 `json:"lease_ms"`
	FirstToken  int64   `json:"first_token"`
	SecondToken int64   `json:"second_token"`
	// DoubleGrant: B entered while A was still inside, believing it held
	// the lock (from the spans; A's ends when its lease is lost or it
	// unlocks).
	DoubleGrant        bool    `json:"double_grant"`
	FirstStillBelieves bool    `json:"first_still_believes_it_holds"`
	FirstVerifyError   string  `json:"first_verify_error"`
	OlderTokenRejected bool    `json:"older_token_write_rejected"`
	FencedValue        string  `json:"fenced_value"`
	Timeline           []Event `json:"timeline"`
	history
	marks []Mark // for the report
}

// RedLock replays Kleppmann's counter-example to Redlock: five independent
// masters; client A reaches only nodes 1-3 (4 and 5 are cut off from it) and
// takes the lock on that quorum; node 3's clock jumps forward (emulated by
// PEXPIRE on its key), so the lock expires there; client B, reaching all
// five, takes the lock on nodes 3-5 — a quorum too. Both hold it at once,
// and A's lease has not run out on A's clock. Then both write to a fenced
// resource: B's newer token wins and A's older one is rejected.
func RedLock(ctx context.Context, lease time.Duration) (*RedLockResult, error) {
	if lease < 100*time.Millisecond {
		return nil, errors.New("redlock: lease must be at least 100ms")
	}
	const n = 5
	nodes, err := redisproc.StartMasters(ctx, n, redisproc.Options{})
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, s := range nodes {
			s.Close()
		}
	}()
	dead, err := freeport.Addr() // nothing listens there
	if err != nil {
		return nil, err
	}
	res := &RedLockResult{Nodes: n, LeaseMS: msf(lease)}
	tl := NewTimeline()
	name := "drill:redlock:" + randomID()
	lane := fmt.Sprintf("RedLock on %d masters", n)
	mk := func(addr, label string) (*dlock.Client, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
		c, err := dlock.New(rdb, dlock.Config{Label: label})
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return c, func() { c.Close(); rdb.Close() }, nil
	}
	var aClients, bClients []*dlock.Client
	for i, s := range nodes {
		addr := s.Addr()
		if i >= 3 {
			addr = dead // A cannot reach nodes 4 and 5
		}
		ca, closeA, err := mk(addr, "A")
		if err != nil {
			return nil, err
		}
		defer closeA()
		cb, closeB, err := mk(s.Addr(), "B")
		if err != nil {
			return nil, err
		}
		defer closeB()
		aClients, bClients = append(aClients, ca), append(bClients, cb)
	}
	la, err := dlock.NewRedLock(name, aClients...).Acquire(ctx, dlock.LeaseTime(lease), dlock.Wait(0))
	if err != nil {
		return nil, fmt.Errorf("redlock: A: %w", err)
	}
	res.FirstToken = la.Token()
	spanA := tl.Enter(lane, "A", fmt.Sprintf("acquired on nodes 1-3 (4 and 5 unreachable from A), token %d, lease %v", la.Token(), lease))
	context.AfterFunc(la.Context(), func() { tl.End(spanA) }) // A stops believing it holds the lock

	node3 := redis.NewClient(&redis.Options{Addr: nodes[2].Addr()})
	defer node3.Close()
	if err := node3.PExpire(ctx, dlock.DefaultPrefix+"{"+name+"}", time.Millisecond).Err(); err != nil {
		return nil, err
	}
	res.marks = append(res.marks, Mark{AtMS: msf(tl.Add("-", "node 3's clock jumps forward: the lock expires there (PEXPIRE 1ms)")),
		Label: "node 3's clock jumps: A's key expires there"})
	if err := sleep(ctx, 5*time.Millisecond); err != nil {
		return nil, err
	}
	lb, err := dlock.NewRedLock(name, bClients...).Acquire(ctx, dlock.LeaseTime(lease), dlock.Wait(lease/2))
	if err != nil {
		return nil, fmt.Errorf("redlock: B could not get a quorum: %w", err)
	}
	res.SecondToken = lb.Token()
	spanB := tl.Enter(lane, "B", fmt.Sprintf("acquired on nodes 3-5: a quorum too, token %d", lb.Token()))
	res.FirstStillBelieves = la.Err() == nil
	tl.Add("A", fmt.Sprintf("still holds on its own clock: %v (no renewal or check has run yet)", res.FirstStillBelieves))

	store := redis.NewClient(&redis.Options{Addr: nodes[0].Addr()})
	defer store.Close()
	key := "drill:redlock:data:" + randomID()
	defer store.Del(context.WithoutCancel(ctx), key)
	if err := fence.Set(ctx, store, key, "written by B", lb.Token(), 0); err != nil {
		return nil, fmt.Errorf("redlock: B's write: %w", err)
	}
	tl.Point(lane, "B", "fenced write: accepted", tl.Add("B", "writes the resource with its token: accepted"))
	err = fence.Set(ctx, store, key, "written by A", la.Token(), 0)
	res.OlderTokenRejected = errors.Is(err, fence.ErrStale)
	if err != nil && !res.OlderTokenRejected {
		return nil, fmt.Errorf("redlock: A's write: %w", err)
	}
	at := tl.Add("A", fmt.Sprintf("writes the resource with its older token: %s", errText(err)))
	if res.OlderTokenRejected {
		tl.Point(lane, "A", "fenced write: rejected (older token)", at)
	} else {
		tl.Point(lane, "A", "fenced write: "+errText(err), at)
	}
	res.FencedValue, _, _ = fence.Get(ctx, store, key)
	verr := la.Verify(ctx)
	res.FirstVerifyError = errText(verr)
	at = tl.Add("A", "Verify (check before commit) would have caught it: "+errText(verr))
	if verr != nil {
		tl.Point(lane, "A", "Verify: lost (no quorum)", at)
	} else {
		tl.Point(lane, "A", "Verify: ok", at)
	}
	tl.End(spanA)
	_ = la.Unlock(context.WithoutCancel(ctx))
	tl.End(spanB)
	_ = lb.Unlock(context.WithoutCancel(ctx))
	res.Timeline, res.history = tl.Events(), tl.history()
	res.fromHistory()
	return res, nil
}

// fromHistory sets what the result reads from its spans.
func (r *RedLockResult) fromHistory() {
	r.DoubleGrant = DoubleGrants(r.Spans) > 0
}

// Summary returns what the text and the HTML report show.
func (r *RedLockResult) Summary() *Summary {
	return &Summary{
		Title: fmt.Sprintf("redlock (000 §2.8): %d independent masters, lease %.0f ms; a clock jump on one node gives two clients a quorum", r.Nodes, r.LeaseMS),
		Parts: []Part{{Events: r.Timeline}},
		Figures: []Figure{
			{"double grant (B got in while A held a quorum)", fmt.Sprint(r.DoubleGrant)},
			{"both inside at once", bothInside(r.Spans, r.lane(), "A", "B")},
			{"older token's write rejected by the fence", fmt.Sprintf("%v (%d < %d); the resource holds %q", r.OlderTokenRejected, r.FirstToken, r.SecondToken, r.FencedValue)},
		},
		Spans: r.Spans, Points: r.points, Marks: r.marks, Zooms: r.zoom(),
	}
}

// lane is the lane of the drill's one lock.
func (r *RedLockResult) lane() string {
	if len(r.Spans) == 0 {
		return ""
	}
	return r.Spans[0].Lane
}

// zoom is the stretch from A's grant to the two writes, enlarged.
func (r *RedLockResult) zoom() []Window {
	if len(r.Spans) == 0 || len(r.points) < 2 {
		return nil
	}
	from := r.Spans[0].StartMS
	to := r.points[1].AtMS // the second write
	pad := max((to-from)*0.1, 0.5)
	return []Window{{
		Title:  fmt.Sprintf("Enlarged: %.1f – %.1f ms: A's grant, the clock jump, B's grant and both writes", from-pad, to+3*pad),
		FromMS: from - pad, ToMS: to + 3*pad,
	}}
}
