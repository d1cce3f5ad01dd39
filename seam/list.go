package seam

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// Listing is how a backend's List finds and reads its locks; its List
// method is that List, the same on every backend.
type Listing[T any] struct {
	// Names returns the lock names matching glob, each once, or the
	// store's error.
	Names func(ctx context.Context, glob string) ([]string, error)
	// Inspect reads the lock called name (as the backend's Inspect does:
	// ErrWrongType says its keys are of no lock shape).
	Inspect func(ctx context.Context, name string) (T, error)
	// InspectBatch, if set, reads Batch names in one call instead (the
	// last call fewer): an answer and an error per name.
	InspectBatch func(ctx context.Context, names []string) ([]T, []error)
	Batch        int
	// Workers is how many calls run at once.
	Workers int
	// Held, Oldest and Name read an answer: whether it is held, the
	// earliest Since of its holders (zero: unknown), its lock's name.
	Held   func(T) bool
	Oldest func(T) time.Time
	Name   func(T) string
}

// List returns the held locks whose names match pattern (a Redis glob, ""
// for "*", see MatchGlob), oldest first (by the earliest Since of their
// holders; unknown ages last, ties by name). Names that are not valid lock
// names and locks whose keys are of no lock shape are left out. A pattern
// longer than MaxNameLen returns ErrInvalidArgument; an error of Names or
// Inspect is returned, and no locks.
func (l Listing[T]) List(ctx context.Context, pattern string) ([]T, error) {
	if err := CheckContext(ctx); err != nil {
		return nil, Wrap("list", "", pattern, err)
	}
	glob, err := CheckPattern(pattern)
	if err != nil {
		return nil, Wrap("list", "", pattern, err)
	}
	names, err := l.Names(ctx, glob)
	if err != nil {
		return nil, StoreErr(ctx, "list", "", glob, err)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return CheckName(n) != nil })
	inspect, batch := l.InspectBatch, l.Batch
	if inspect == nil {
		inspect, batch = l.each, 1
	}
	held, err := collect(ctx, slices.Collect(slices.Chunk(names, max(batch, 1))), l.Workers, func(ctx context.Context, batch []string) ([]T, bool, error) {
		infos, errs := inspect(ctx, batch)
		kept := make([]T, 0, len(infos))
		for i, err := range errs {
			switch {
			case errors.Is(err, ErrWrongType):
			case err != nil:
				return nil, false, err
			case l.Held(infos[i]):
				kept = append(kept, infos[i])
			}
		}
		return kept, true, nil
	})
	if err != nil {
		return nil, Wrap("list", "", glob, err) // an Inspect's error names its lock already
	}
	return sortOldest(held, l.Oldest, l.Name), nil
}

// each reads names one by one with Inspect.
func (l Listing[T]) each(ctx context.Context, names []string) ([]T, []error) {
	infos, errs := make([]T, len(names)), make([]error, len(names))
	for i, name := range names {
		infos[i], errs[i] = l.Inspect(ctx, name)
	}
	return infos, errs
}

// collect calls inspect on every one of items, at most workers calls at
// once (at least one), and returns the infos for which inspect said keep,
// in no particular order. The ctx inspect gets ends when ctx does or when a
// call fails: collect then starts no further call, waits for those running
// and returns ctx's error if ctx has ended, else the first error inspect
// returned, and no infos.
func collect[N, T any](ctx context.Context, items []N, workers int, inspect func(ctx context.Context, item N) (info T, keep bool, err error)) ([]T, error) {
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

// sortOldest returns the infos of every part in one slice, oldest first:
// by oldest (a zero time is an unknown age: last), ties by name. Each
// info's oldest and name are read once.
func sortOldest[T any](parts [][]T, oldest func(T) time.Time, name func(T) string) []T {
	type keyed struct {
		at   time.Time
		name string
		info *T
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	ks := make([]keyed, 0, n)
	for _, p := range parts {
		for i := range p {
			ks = append(ks, keyed{oldest(p[i]), name(p[i]), &p[i]})
		}
	}
	slices.SortFunc(ks, func(a, b keyed) int {
		switch {
		case a.at.IsZero() != b.at.IsZero():
			if a.at.IsZero() {
				return 1
			}
			return -1
		case !a.at.Equal(b.at):
			return a.at.Compare(b.at)
		}
		return cmp.Compare(a.name, b.name)
	})
	sorted := make([]T, len(ks))
	for i, k := range ks {
		sorted[i] = *k.info
	}
	return sorted
}
