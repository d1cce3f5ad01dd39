package drill

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/cmd/dlock/backend"
)

// The partition inside the ensemble (FaultPartition): the leader is cut
// off from its peers while every client still reaches it. Besides the
// sale's workers (which know every member), the minority side holds locks
// across the cut: clients that reach only the leader take one sku's lock
// each just before the cut and hold it until they are told they lost it;
// for each, a client that reaches only the other members queues for the
// same lock (it is granted once the majority has let the holder's lease
// expire, whichever of the sale's workers are stuck on the old leader).
// The drill measures, for each, whether it was told before the majority
// granted its lock again (the margin), how long the majority took to grant
// it again, and how long to elect a leader of its own.

// minorityHolds is how many locks the minority side holds across the cut
// (one sku each; fewer if there are fewer skus).
const minorityHolds = 4

// minority is the minority side of one partition run.
type minority struct {
	b, other *backend.Backend // clients of the old leader; of the other members
	clients  []backend.Client
	holds    []*minorityHold
	wg       sync.WaitGroup
}

// minorityHold is one lock held across the cut.
type minorityHold struct {
	sku, who string
	startMS  float64       // when it was granted (its span's start)
	lost     chan struct{} // closed once the holder was told it lost the lock
	lostMS   float64       // when (set before lost closes)
}

// holdMinority opens clients that reach only member i of ens (through its
// client proxy) and has each take one sku's lock, recorded on tl; each
// holder stays inside until it is told it lost the lock (Done, or Err on
// its own clock, polled every millisecond), then leaves and unlocks.
func holdMinority(ctx context.Context, o ConsensusFailoverOptions, ens *ensemble, i int, tl *Timeline, skus []string) (*minority, error) {
	b, err := backend.Open(ctx, o.Backend, ens.px[i].Addr())
	if err != nil {
		return nil, err
	}
	var others []string
	for j, p := range ens.px {
		if j != i {
			others = append(others, p.Addr())
		}
	}
	other, err := backend.Open(ctx, o.Backend, strings.Join(others, ","))
	if err != nil {
		b.Close()
		return nil, err
	}
	m := &minority{b: b, other: other}
	n := min(minorityHolds, len(skus))
	for j := range n {
		c, err := b.NewClient(ctx, backend.ClientOptions{Label: "minority-" + strconv.Itoa(j), Session: o.Session})
		if err != nil {
			m.close()
			return nil, err
		}
		m.clients = append(m.clients, c)
	}
	type granted struct {
		j   int
		l   *dlock.Lease
		err error
	}
	got := make(chan granted, n)
	for j, c := range m.clients {
		go func() {
			l, err := c.Lock("stock:"+skus[j]).Acquire(ctx, dlock.Wait(2*o.Session+o.Down))
			got <- granted{j, l, err}
		}()
	}
	var errs []error
	for range n {
		g := <-got
		if g.err != nil {
			errs = append(errs, g.err)
			continue
		}
		m.hold(ctx, tl, skus[g.j], "minority"+strconv.Itoa(g.j), g.l)
		c, err := other.NewClient(ctx, backend.ClientOptions{Label: "majority-" + strconv.Itoa(g.j), Session: o.Session})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		m.clients = append(m.clients, c)
		m.queue(ctx, tl, skus[g.j], "majority"+strconv.Itoa(g.j), c.Lock("stock:"+skus[g.j]), 2*o.Session+o.Down+30*time.Second)
	}
	if err := errors.Join(errs...); err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

// hold records l on tl and keeps it until it is lost or ctx ends.
func (m *minority) hold(ctx context.Context, tl *Timeline, sku, who string, l *dlock.Lease) {
	span := tl.Begin(Span{Lane: sku, Who: who, Token: l.Token()})
	h := &minorityHold{sku: sku, who: who, startMS: tl.Spans()[span].StartMS, lost: make(chan struct{})}
	m.holds = append(m.holds, h)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
	wait:
		for l.Err() == nil {
			select {
			case <-l.Done():
				break wait
			case <-ctx.Done():
				break wait
			case <-tick.C:
			}
		}
		tl.End(span)
		if l.Err() != nil {
			h.lostMS = msf(tl.Since())
			close(h.lost)
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = l.Unlock(uctx) // a lost lock's Unlock reports the loss
		cancel()
	}()
}

// queue has lk wait up to wait for its lock, records the grant on tl and
// gives the lock back at once.
func (m *minority) queue(ctx context.Context, tl *Timeline, sku, who string, lk dlock.Locker, wait time.Duration) {
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		l, err := lk.Acquire(ctx, dlock.Wait(wait))
		if err != nil {
			return // the hold's figures show it was never granted again
		}
		tl.End(tl.Begin(Span{Lane: sku, Who: who, Token: l.Token()}))
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		_ = l.Unlock(uctx)
		cancel()
	}()
}

// toldAndRegranted waits until every hold was told it lost its lock and
// its sku was granted again (a span of another holder began after it), or
// ctx ends.
func (m *minority) toldAndRegranted(ctx context.Context, tl *Timeline) error {
	for {
		done := true
		spans := tl.Spans()
		for _, h := range m.holds {
			select {
			case <-h.lost:
				done = done && nextGrant(spans, h) >= 0
			default:
				done = false
			}
		}
		if done {
			return nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
}

// nextGrant returns the index of the first span on h's sku that began after
// h was granted, of another holder; -1 if none.
func nextGrant(spans []Span, h *minorityHold) int {
	next := -1
	for i, s := range spans {
		if s.Lane == h.sku && s.Who != h.who && s.StartMS > h.startMS && (next < 0 || s.StartMS < spans[next].StartMS) {
			next = i
		}
	}
	return next
}

// figures sets r's partition figures from the spans: for each hold, the
// margin from its loss signal to the next grant of its sku (it must be >
// 0) and the time from the cut to that grant.
func (m *minority) figures(r *ConsensusRun, spans []Span, cutMS float64) {
	r.MinorityHolds = len(m.holds)
	first := true
	for _, h := range m.holds {
		next := nextGrant(spans, h)
		if next < 0 {
			continue
		}
		r.RegrantMS = max(r.RegrantMS, spans[next].StartMS-cutMS)
		select {
		case <-h.lost:
		default:
			continue // never told: not in time
		}
		margin := spans[next].StartMS - h.lostMS
		if margin > 0 {
			r.ToldInTime++
		}
		if first || margin < r.MinMarginMS {
			r.MinMarginMS, first = margin, false
		}
	}
}

// close stops the holders (those still inside leave and unlock) and closes
// their clients.
func (m *minority) close() {
	var errs []error
	for _, c := range m.clients {
		errs = append(errs, c.Close()) // a holder still inside is told, leaves, unlocks
	}
	m.wg.Wait()
	_ = errors.Join(append(errs, m.b.Close(), m.other.Close())...)
}

// tokensOutOfOrder counts the grants whose fencing token is not above the
// one granted before on the same lane (spans in the order they began).
func tokensOutOfOrder(spans []Span) int {
	byLane := map[string][]Span{}
	for _, s := range spans {
		if s.Token != 0 {
			byLane[s.Lane] = append(byLane[s.Lane], s)
		}
	}
	n := 0
	for _, ss := range byLane {
		sort.SliceStable(ss, func(a, b int) bool { return ss[a].StartMS < ss[b].StartMS })
		for k := 1; k < len(ss); k++ {
			if ss[k].Token <= ss[k-1].Token {
				n++
			}
		}
	}
	return n
}
