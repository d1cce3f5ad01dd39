package dlock

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// scriptCall is one invocation of a script.
type scriptCall struct {
	s    *redis.Script
	keys []string
	args []any
}

// run runs the call by EVALSHA, with EVAL on NOSCRIPT.
func (sc scriptCall) run(ctx context.Context, rdb redis.Scripter) *redis.Cmd {
	return sc.s.Run(ctx, rdb, sc.keys, sc.args...)
}

// queue adds the call to a pipeline by EVALSHA (or EVAL when eval is true).
func (sc scriptCall) queue(ctx context.Context, p redis.Pipeliner, eval bool) *redis.Cmd {
	if eval {
		return sc.s.Eval(ctx, p, sc.keys, sc.args...)
	}
	return sc.s.EvalSha(ctx, p, sc.keys, sc.args...)
}

// pipelined runs calls in one pipeline made by pipe, by EVALSHA; the calls
// that answered NOSCRIPT (a restarted server, SCRIPT FLUSH, a failover) run
// once more by EVAL in a second pipeline, so the fallback costs a round trip
// only when the script cache was lost. after, if not nil, adds commands that
// must follow the calls in the same pipeline (WAIT); they run again in the
// second pipeline. This is the one place the NOSCRIPT fallback of pipelines
// is written; a single call uses scriptCall.run.
func pipelined(ctx context.Context, pipe func() redis.Pipeliner, calls []scriptCall, after func(redis.Pipeliner)) []*redis.Cmd {
	exec := func(idx []int, eval bool) []*redis.Cmd {
		p := pipe()
		cmds := make([]*redis.Cmd, len(idx))
		for j, i := range idx {
			cmds[j] = calls[i].queue(ctx, p, eval)
		}
		if after != nil {
			after(p)
		}
		_, _ = p.Exec(ctx) // errors are per command
		return cmds
	}
	all := make([]int, len(calls))
	for i := range all {
		all[i] = i
	}
	cmds := exec(all, false)
	var again []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		for j, cmd := range exec(again, true) {
			cmds[again[j]] = cmd
		}
	}
	return cmds
}

// runCalls runs calls in one pipeline and returns their integer replies, or
// the first error.
func runCalls(ctx context.Context, rdb redis.UniversalClient, calls []scriptCall) ([]int64, error) {
	cmds := pipelined(ctx, rdb.Pipeline, calls, nil)
	ns := make([]int64, len(calls))
	for i, cmd := range cmds {
		n, err := cmd.Int64()
		if err != nil {
			return nil, err
		}
		ns[i] = n
	}
	return ns, nil
}
