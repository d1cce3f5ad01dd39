package etcdlock

import (
	"context"
	"time"
)

// untimed returns ctx without its deadline: ctx still ends the etcd calls
// made under it (they return when ctx is done, with ctx's error: a
// deadline's codes.DeadlineExceeded), but gRPC does not send the deadline
// to etcd as a timeout, which costs a timer and a header on both sides of
// every request: 8–15 µs per request on the developers' machine
// (BenchmarkAcquireDeadline, and bench/README.md "A deadline for free").
func untimed(ctx context.Context) context.Context {
	if _, ok := ctx.Deadline(); !ok {
		return ctx
	}
	return noDeadline{ctx}
}

// noDeadline is a context whose Deadline says it has none; Done and Err
// are its parent's.
type noDeadline struct{ context.Context }

func (noDeadline) Deadline() (time.Time, bool) { return time.Time{}, false }
