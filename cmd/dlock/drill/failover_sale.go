package drill

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/fence"
)

// failoverSale is the sale both failover drills fault: workers, each with
// its own lock client, sell random skus under per-sku locks until finish;
// every hold is recorded on one Timeline (the witness that counts double
// grants, whatever the lock service believes).
type failoverSale struct {
	tl *Timeline
	// failed counts Acquire calls that returned an error, rejected the
	// writes the fence refused (fence.ErrStale), lost the Unlocks that
	// found the lock lost.
	failed, rejected, lost atomic.Int64
	stop                   chan struct{}
	once                   sync.Once
	wg                     sync.WaitGroup
}

// startSale starts one worker per element of locks (locks[w] returns
// worker w's locker of a name): each picks a sku at random (seeded by seed
// and its index), takes the lock "stock:<sku>" with opts, runs section
// inside it and unlocks, until finish.
func startSale(ctx context.Context, skus []string, seed uint64, locks []func(name string) dlock.Locker, opts []dlock.Option,
	section func(l *dlock.Lease, sku string) error) *failoverSale {
	s := &failoverSale{tl: NewTimeline(), stop: make(chan struct{})}
	for w, lock := range locks {
		rng := rand.New(rand.NewPCG(seed, uint64(w)))
		who := "w" + strconv.Itoa(w)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for {
				select {
				case <-s.stop:
					return
				case <-ctx.Done():
					return
				default:
				}
				sku := skus[rng.IntN(len(skus))]
				// The lease's Context derives from ctx: ctx must outlive the hold.
				l, err := lock("stock:"+sku).Acquire(ctx, opts...)
				if err != nil {
					s.failed.Add(1)
					_ = sleep(ctx, 20*time.Millisecond) // the service is down or refusing: don't spin
					continue
				}
				i := s.tl.Begin(Span{Lane: sku, Who: who, Token: l.Token()})
				err = section(l, sku)
				s.tl.End(i)
				if errors.Is(err, fence.ErrStale) {
					s.rejected.Add(1)
				}
				if errors.Is(l.Unlock(context.WithoutCancel(ctx)), dlock.ErrLockLost) {
					s.lost.Add(1)
				}
			}
		}()
	}
	return s
}

// finish stops the workers and waits for them; it is idempotent.
func (s *failoverSale) finish() {
	s.once.Do(func() { close(s.stop) })
	s.wg.Wait()
}

// skuNames returns sku-0 … sku-(n-1).
func skuNames(n int) []string {
	skus := make([]string, n)
	for i := range skus {
		skus[i] = fmt.Sprintf("sku-%d", i)
	}
	return skus
}

// failoverStock is every sku's stock: never sold out, so that every double
// grant can show as an oversell.
const failoverStock = 1 << 40

// longestGap returns the longest stretch in [fromMS, toMS] in which no span
// started: the time the service granted no lock at all.
func longestGap(spans []Span, fromMS, toMS float64) float64 {
	starts := make([]float64, 0, len(spans))
	for _, s := range spans {
		if s.StartMS >= fromMS && s.StartMS <= toMS {
			starts = append(starts, s.StartMS)
		}
	}
	slices.Sort(starts)
	gap, last := 0.0, fromMS
	for _, at := range starts {
		gap, last = max(gap, at-last), at
	}
	return max(gap, toMS-last)
}

// reportSpans keeps the spans around [fromMS, toMS] for the HTML report
// (at most 5000).
func reportSpans(spans []Span, fromMS, toMS float64) []Span {
	var out []Span
	for _, s := range spans {
		if s.EndMS < fromMS-200 || s.StartMS > toMS+200 {
			continue
		}
		out = append(out, s)
		if len(out) >= 5000 {
			break
		}
	}
	return out
}
