package seam

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"
)

// Collect calls inspect on every one of items, at most workers calls at
// once (at least one), and returns the infos for which inspect said keep,
// in no particular order. The ctx inspect gets ends when ctx does or when a
// call fails: Collect then starts no further call, waits for those running
// and returns ctx's error if ctx has ended, else the first error inspect
// returned, and no infos.
func Collect[N, T any](ctx context.Context, items []N, workers int, inspect func(ctx context.Context, item N) (info T, keep bool, err error)) ([]T, error) {
	ictx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	todo := make(chan N)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		infos []T
	)
	for range min(max(workers, 1), len(items)) {
		wg.Go(func() {
			for item := range todo {
				info, keep, err := inspect(ictx, item)
				switch {
				case err != nil:
					cancel(err)
				case keep:
					mu.Lock()
					infos = append(infos, info)
					mu.Unlock()
				}
			}
		})
	}
feed:
	for _, n := range items {
		select {
		case todo <- n:
		case <-ictx.Done():
			break feed
		}
	}
	close(todo)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := context.Cause(ictx); err != nil {
		return nil, err
	}
	return infos, nil
}

// SortOldest sorts infos oldest first: by the earliest since of the holders
// of each (a zero time is an unknown age; an info with no known age goes
// last), ties by name.
func SortOldest[T, H any](infos []T, holders func(T) []H, since func(H) time.Time, name func(T) string) {
	earliest := func(info T) time.Time {
		var t time.Time
		for _, h := range holders(info) {
			if s := since(h); !s.IsZero() && (t.IsZero() || s.Before(t)) {
				t = s
			}
		}
		return t
	}
	slices.SortFunc(infos, func(a, b T) int {
		ta, tb := earliest(a), earliest(b)
		switch {
		case ta.IsZero() != tb.IsZero():
			if ta.IsZero() {
				return 1
			}
			return -1
		case !ta.Equal(tb):
			return ta.Compare(tb)
		}
		return cmp.Compare(name(a), name(b))
	})
}
