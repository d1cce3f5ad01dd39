package dlocktest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
	"github.com/dlockgo/dlock/seam"
)

// listed returns the names of infos in order, checking that each is held
// and that they come oldest first.
func listed(t *testing.T, infos []dlock.Info) []string {
	t.Helper()
	var names []string
	for i, info := range infos {
		if !info.Held || len(info.Holders) == 0 {
			t.Errorf("%q listed but not held: %+v", info.Name, info)
		}
		if i > 0 && infos[i-1].Oldest().After(info.Oldest()) {
			t.Errorf("%q (since %v) after %q (since %v): not oldest first", info.Name, info.Oldest(), infos[i-1].Name, infos[i-1].Oldest())
		}
		names = append(names, info.Name)
	}
	return names
}

// List finds the held locks of every shape by a glob over their names,
// oldest first, read as Inspect reads them: a free lock is left out, a
// name with glob characters is matched by the escaped pattern only, a
// released lock is gone from the next List; bad input is refused.
func (s *suite) list(t *testing.T) {
	c := s.b.NewClient(t)
	if c.List == nil {
		t.Skip("the backend client has no List")
	}
	ctx := testCtx(t, 60*time.Second)
	base := name(t) + "."
	var leases []*dlock.Lease
	hold := func(l dlock.Locker) *dlock.Lease {
		t.Helper()
		lease := acquire(t, ctx, l)
		leases = append(leases, lease)
		time.Sleep(2 * time.Millisecond) // a Since of its own, in ms
		return lease
	}
	defer func() {
		for _, l := range leases {
			_ = l.Unlock(ctx)
		}
	}()
	want := map[string]string{} // name: shape
	stock1 := hold(c.Mutex(base + "stock:1"))
	want[base+"stock:1"] = "mutex"
	if c.Lock != nil {
		hold(c.Lock(base + "order/7"))
		want[base+"order/7"] = "lock"
	}
	if c.Read != nil {
		hold(c.Read(base + "stock:2"))
		want[base+"stock:2"] = "rw"
	}
	if c.Semaphore != nil {
		hold(c.Semaphore(base+"a[1]", 2))
		want[base+"a[1]"] = "semaphore"
	}
	// Left out: a released lock, a free Semaphore whose count the store
	// keeps.
	unlock(t, acquire(t, ctx, c.Mutex(base+"stock:freed")))
	if c.Semaphore != nil {
		unlock(t, acquire(t, ctx, c.Semaphore(base+"stock:sem", 1)))
	}

	all, err := c.List(ctx, seam.QuoteGlob(base)+"*")
	if err != nil {
		t.Fatal(err)
	}
	got := listed(t, all)
	var wantNames []string
	for n := range want {
		wantNames = append(wantNames, n)
	}
	if !sameNames(got, wantNames) {
		t.Fatalf("List(*) = %v, want %v", got, wantNames)
	}
	for _, info := range all {
		if shape := want[info.Name]; info.Shape != shape && !(shape == "lock" && info.Shape == "fair") {
			t.Errorf("%s listed as a %q, want %q", info.Name, info.Shape, shape)
		}
	}
	if h := all[0].Holders[0]; all[0].Name != base+"stock:1" || h.Fence != stock1.Token() {
		t.Errorf("the oldest listed is %s (token %d), want %sstock:1 (token %d)", all[0].Name, h.Fence, base, stock1.Token())
	}

	stocks, err := c.List(ctx, seam.QuoteGlob(base)+"stock:*")
	if got := listed(t, stocks); err != nil || !sameNames(got, matching(want, base+"stock:")) {
		t.Errorf("List(stock:*) = %v, %v", got, err)
	}
	if c.Semaphore != nil {
		infos, err := c.List(ctx, seam.QuoteGlob(base+"a[1]"))
		if got := listed(t, infos); err != nil || !slices.Equal(got, []string{base + "a[1]"}) {
			t.Errorf(`List(a\[1\]) = %v, %v; want a[1]`, got, err)
		}
		if infos, err := c.List(ctx, seam.QuoteGlob(base)+"a[1]"); err != nil || len(infos) != 0 {
			t.Errorf("List(a[1]) = %v, %v; want nothing (it matches a1)", listed(t, infos), err)
		}
	}

	unlock(t, stock1)
	stocks, err = c.List(ctx, seam.QuoteGlob(base)+"stock:*")
	if got := listed(t, stocks); err != nil || slices.Contains(got, base+"stock:1") {
		t.Errorf("List(stock:*) after stock:1's release = %v, %v", got, err)
	}

	if _, err := c.List(ctx, strings.Repeat("*", seam.MaxNameLen+1)); !errors.Is(err, dlock.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), `dlock: list "`) {
		t.Errorf("List(a pattern too long) = %v, want ErrInvalidArgument", err)
	}
	//lint:ignore SA1012 a nil ctx is refused, not a panic
	if _, err := c.List(nil, "*"); !errors.Is(err, dlock.ErrInvalidArgument) { //nolint:staticcheck
		t.Errorf("List(nil ctx) = %v, want ErrInvalidArgument", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.List(cancelled, "*"); !errors.Is(err, context.Canceled) {
		t.Errorf("List(a cancelled ctx) = %v, want context.Canceled", err)
	}
}

// sameNames reports whether a and b hold the same names.
func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// matching returns the names of want that start with prefix.
func matching(want map[string]string, prefix string) []string {
	var out []string
	for n := range want {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
