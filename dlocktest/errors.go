package dlocktest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockgo/dlock"
)

// CheckError fails t unless err wraps want and reads in the one format of
// dlock's errors (see Errors in package dlock's doc): one line that starts
// with prefix (`dlock: acquire mutex "stock:1": `, `dlock: new client: `),
// "dlock:" once, no word twice in a row and no colon at its end. A backend
// checks its own errors with it (its New's, for one).
func CheckError(t testing.TB, err, want error, prefix string) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%v, want an error wrapping %v", err, want)
		return
	}
	if p := TextProblem(err.Error(), prefix); p != "" {
		t.Errorf("%q: %s", err, p)
	}
}

// TextProblem says what is wrong with msg as a line in dlock's error format
// starting with prefix (one line, "dlock:" once, no word twice in a row, no
// colon at its end), or "" when nothing is: CheckError's test of the text,
// for an error printed elsewhere (a command's stderr line).
func TextProblem(msg, prefix string) string {
	switch {
	case strings.ContainsAny(msg, "\r\n"):
		return "more than one line"
	case !strings.HasPrefix(msg, prefix):
		return "does not start with " + strconv.Quote(prefix)
	case strings.Count(msg, "dlock:") != 1:
		return `"dlock:" more than once`
	case strings.HasSuffix(strings.TrimSpace(msg), ":"):
		return "ends with a colon"
	}
	words := strings.Fields(msg)
	for i := 1; i < len(words); i++ {
		w := strings.Trim(words[i], `:"(),`)
		if w != "" && strings.EqualFold(w, strings.Trim(words[i-1], `:"(),`)) {
			return "repeats " + strconv.Quote(w)
		}
	}
	return ""
}

// errorTexts provokes the common error paths of a backend's Mutex and
// checks each error's text and sentinel: a bad name, a bad duration, a ctx
// already cancelled, a refusal, Unlock and Extend of a lease unlocked, a
// closed client, Do's bad input, Inspect of a bad name, and a loss as Err,
// Verify and Unlock report it (when the backend can steal a lock, or has
// fixed leases).
func (s *suite) errorTexts(t *testing.T) {
	c := s.b.NewClient(t)
	ctx := testCtx(t, s.b.Lease*4+30*time.Second)
	n := name(t)
	on := func(op string) string { return "dlock: " + op + ` mutex "` + n + `": ` }

	_, err := c.Mutex("").Acquire(ctx)
	CheckError(t, err, dlock.ErrInvalidName, `dlock: acquire mutex "": `)
	_, err = c.Mutex(n).Acquire(ctx, dlock.LeaseTime(0))
	CheckError(t, err, dlock.ErrInvalidDuration, on("acquire"))
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Mutex(n).Acquire(cancelled)
	CheckError(t, err, context.Canceled, on("acquire"))

	l := acquire(t, ctx, c.Mutex(n))
	_, err = s.b.NewClient(t).Mutex(n).Acquire(ctx, dlock.Wait(0))
	CheckError(t, err, dlock.ErrNotAcquired, on("acquire"))
	CheckError(t, l.Extend(ctx, 0), dlock.ErrInvalidDuration, on("extend"))
	unlock(t, l)
	CheckError(t, l.Unlock(ctx), dlock.ErrNotHeld, on("unlock"))
	CheckError(t, l.Extend(ctx, time.Second), dlock.ErrNotHeld, on("extend"))

	closed := s.b.NewClient(t)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = closed.Mutex(n).Acquire(ctx)
	CheckError(t, err, dlock.ErrClosed, on("acquire"))

	CheckError(t, dlock.Do(ctx, c.Mutex(n), nil), dlock.ErrInvalidArgument, `dlock: do "`+n+`": `)
	CheckError(t, dlock.Do(ctx, nil, nil), dlock.ErrInvalidArgument, "dlock: do: ")
	if c.Inspect != nil {
		_, err = c.Inspect(ctx, "")
		CheckError(t, err, dlock.ErrInvalidName, `dlock: inspect "": `)
	}

	// A loss: reported by Err as the hold's, by Verify and Unlock as theirs.
	var lost *dlock.Lease
	switch {
	case s.b.Steal != nil:
		lost = acquire(t, ctx, c.Mutex(n))
		s.b.Steal(t, n)
		CheckError(t, lost.Verify(ctx), dlock.ErrLockLost, on("verify"))
	case s.b.Lease != 0:
		lost = acquire(t, ctx, c.Mutex(n), dlock.LeaseTime(s.b.Lease))
		select {
		case <-lost.Done():
		case <-ctx.Done():
			t.Fatal("a fixed lease never ran out")
		}
		CheckError(t, lost.Verify(ctx), dlock.ErrLockLost, on("verify"))
	default:
		return
	}
	CheckError(t, lost.Err(), dlock.ErrLockLost, on("hold"))
	CheckError(t, context.Cause(lost.Context()), dlock.ErrLockLost, on("hold"))
	CheckError(t, lost.Unlock(ctx), dlock.ErrLockLost, on("unlock"))
}
