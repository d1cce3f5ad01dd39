package dlock

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// scripter runs the script calls of one Client on its go-redis client: by
// FCALL of the package's function library while the server runs it
// (loading the library where the server has lost it), by EVALSHA once the
// server refused functions (a Redis before 7.0, or an ACL that denies
// FCALL or FUNCTION LOAD), and any call the server has lost the script or
// function of once more by EVAL, so a lost cache costs that call one round
// trip more and nothing else.
type scripter struct {
	rdb      redis.UniversalClient
	evalOnly atomic.Bool // the server runs none of our functions
	// deadlined, if not nil, is rdb with ContextTimeoutEnabled, sharing its
	// pool (nil when rdb has it already, or is not a *redis.Client: see
	// deadlinedCopy): the calls made under a ctx with a deadline go through
	// it, on the caller's goroutine (see via).
	deadlined redis.UniversalClient
}

// via returns the client a call under ctx goes through: the one that ends
// it at ctx's deadline when ctx has one and rdb would not, else rdb.
func (s *scripter) via(ctx context.Context) redis.UniversalClient {
	if s.deadlined != nil {
		if _, ok := ctx.Deadline(); ok {
			return s.deadlined
		}
	}
	return s.rdb
}

// args returns sc's command as the scripter sends it now (FCALL or
// EVALSHA), written into sc's own arguments.
func (s *scripter) args(sc scriptCall) []any {
	if s.evalOnly.Load() {
		sc.args[0], sc.args[1] = "evalsha", sc.s.shaArg
	} else {
		sc.args[0], sc.args[1] = "fcall", functions().names[sc.s.idx]
	}
	return sc.args
}

// run runs sc, and once more by EVAL if the server had lost it.
func (s *scripter) run(ctx context.Context, sc scriptCall) *redis.Cmd {
	rdb := s.via(ctx)
	cmd := redis.NewCmd(ctx, s.args(sc)...)
	_ = rdb.Process(ctx, cmd)
	if s.lost(ctx, cmd.Err()) {
		cmd = redis.NewCmd(ctx, sc.evalArgs()...)
		_ = rdb.Process(ctx, cmd)
	}
	return cmd
}

// runInt runs a call whose script returns an integer: the reply is read
// straight into an int64 (no boxing).
func (s *scripter) runInt(ctx context.Context, sc scriptCall) (int64, error) {
	rdb := s.via(ctx)
	cmd := redis.NewIntCmd(ctx, s.args(sc)...)
	_ = rdb.Process(ctx, cmd)
	if s.lost(ctx, cmd.Err()) {
		cmd = redis.NewIntCmd(ctx, sc.evalArgs()...)
		_ = rdb.Process(ctx, cmd)
	}
	return cmd.Result()
}

// pipelined runs calls in one pipeline made by pipe; the calls whose script
// or function the server had lost run once more by EVAL in a second
// pipeline, so the fallback costs a round trip only when the cache was
// lost. after, if not nil, adds commands that must follow the calls in the
// same pipeline (WAIT); they run again in the second pipeline. This is the
// one place the fallback of pipelines is written; a single call uses run.
func (s *scripter) pipelined(ctx context.Context, pipe func() redis.Pipeliner, calls []scriptCall, after func(redis.Pipeliner)) []*redis.Cmd {
	exec := func(idx []int, eval bool) []*redis.Cmd {
		p := pipe()
		cmds := make([]*redis.Cmd, len(idx))
		for j, i := range idx {
			args := calls[i].args
			if eval {
				args = calls[i].evalArgs()
			} else {
				args = s.args(calls[i])
			}
			cmds[j] = redis.NewCmd(ctx, args...)
			_ = p.Process(ctx, cmds[j])
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
		if lostScript(cmd.Err()) {
			again = append(again, i)
		}
	}
	if len(again) > 0 && s.lost(ctx, cmds[again[0]].Err()) {
		for j, cmd := range exec(again, true) {
			cmds[again[j]] = cmd
		}
	}
	return cmds
}

// runCalls runs calls in one pipeline and returns their integer replies, or
// the first error.
func (s *scripter) runCalls(ctx context.Context, calls []scriptCall) ([]int64, error) {
	cmds := s.pipelined(ctx, s.rdb.Pipeline, calls, nil)
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

// lost reports whether a call that failed with err must run once more by
// EVAL because the server ran not its script or function. A lost function
// library is loaded again (on every master of a Cluster) for the calls that
// follow; a server that runs no functions of ours, or refuses to load them,
// is sent EVALSHA from then on.
func (s *scripter) lost(ctx context.Context, err error) bool {
	switch {
	case err == nil:
		return false
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		return true
	case missingFunction(err):
		// A server that refuses the load runs EVALSHA from now on; a load
		// that did not get through (a deadline, a lost connection) is tried
		// again by the next call that misses the function.
		var refused redis.Error
		if err := s.load(ctx); errors.As(err, &refused) {
			s.evalOnly.Store(true)
		}
		return true
	case refusedFunctions(err):
		s.evalOnly.Store(true)
		return true
	}
	return false
}

// load loads the library where it is missing; a library of that name
// already there is the same one.
func (s *scripter) load(ctx context.Context) error {
	load := func(ctx context.Context, rdb redis.Cmdable) error {
		err := rdb.FunctionLoad(ctx, functions().src).Err()
		if err != nil && strings.Contains(err.Error(), "already exists") {
			return nil
		}
		return err
	}
	rdb := s.via(ctx)
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return load(ctx, node) })
	}
	return load(ctx, rdb)
}
