package dlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/go-redis/v9"
)

// luaScript is one Lua script: run by EVALSHA, and by EVAL when the server
// answers NOSCRIPT (a restarted server, SCRIPT FLUSH, a failover). Its
// source and hash are boxed once, so a call boxes nothing of them.
type luaScript struct {
	src, hash      string
	srcArg, shaArg any
}

func newLuaScript(src string) *luaScript {
	h := sha1.Sum([]byte(src))
	s := &luaScript{src: src, hash: hex.EncodeToString(h[:])}
	s.srcArg, s.shaArg = s.src, s.hash
	return s
}

// scriptCall is one invocation of a script: the whole EVALSHA command,
// "evalsha", hash, number of keys, keys, arguments.
type scriptCall struct {
	s    *luaScript
	args []any
}

// header is where a script call's KEYS start in its command.
const header = 3

// begin returns the start of a call of s with room for n more elements (its
// keys and arguments): the one allocation of the call's arguments. Keys and
// arguments that live as long as the call may be given as *string or
// *int64 (go-redis writes them as values): boxing a pointer allocates
// nothing.
func (s *luaScript) begin(keys, n int) []any {
	a := make([]any, header, header+n)
	a[0], a[1], a[2] = "evalsha", s.shaArg, keys
	return a
}

// call builds a call of s with keys and args (a call off the hot path:
// each key is boxed).
func (s *luaScript) call(keys []string, args ...any) scriptCall {
	a := s.begin(len(keys), len(keys)+len(args))
	for _, k := range keys {
		a = append(a, k)
	}
	return scriptCall{s, append(a, args...)}
}

// evalArgs is the call as EVAL (a copy: the EVALSHA form stays as it is).
func (sc scriptCall) evalArgs() []any {
	a := make([]any, len(sc.args))
	copy(a, sc.args)
	a[0], a[1] = "eval", sc.s.srcArg
	return a
}

// run runs the call by EVALSHA, with EVAL on NOSCRIPT.
func (sc scriptCall) run(ctx context.Context, rdb redis.UniversalClient) *redis.Cmd {
	cmd := redis.NewCmd(ctx, sc.args...)
	_ = rdb.Process(ctx, cmd)
	if isNoScript(cmd.Err()) {
		cmd = redis.NewCmd(ctx, sc.evalArgs()...)
		_ = rdb.Process(ctx, cmd)
	}
	return cmd
}

// runInt runs a call whose script returns an integer: the reply is read
// straight into an int64 (no boxing).
func (sc scriptCall) runInt(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	cmd := redis.NewIntCmd(ctx, sc.args...)
	_ = rdb.Process(ctx, cmd)
	if isNoScript(cmd.Err()) {
		cmd = redis.NewIntCmd(ctx, sc.evalArgs()...)
		_ = rdb.Process(ctx, cmd)
	}
	return cmd.Result()
}

// queue adds the call to a pipeline by EVALSHA (or EVAL when eval is true).
func (sc scriptCall) queue(ctx context.Context, p redis.Pipeliner, eval bool) *redis.Cmd {
	args := sc.args
	if eval {
		args = sc.evalArgs()
	}
	cmd := redis.NewCmd(ctx, args...)
	_ = p.Process(ctx, cmd)
	return cmd
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

// isNoScript reports whether err is Redis's NOSCRIPT reply.
func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// call runs sc, pipelined with the calls that other callers of c make at
// the same time (see batcher), and returns its reply; if ctx ends before
// the call is sent, it is not sent and ctx's error is returned. A call
// already sent is waited for, as a go-redis call is: go-redis's timeouts
// bound it.
func (c *Client) call(ctx context.Context, sc scriptCall) *redis.Cmd {
	cmd, _, err := c.calls.do(ctx, sc, true, false)
	if err != nil {
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(err)
	}
	return cmd
}

// callInt is call for a script whose reply is an integer.
func (c *Client) callInt(ctx context.Context, sc scriptCall) (int64, error) {
	return c.calls.doInt(ctx, sc)
}
