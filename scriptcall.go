package dlock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// luaScript is one Lua script: a file of lua/ and the libraries it uses. A
// Client runs it as a function of the package's function library (FCALL,
// Redis 7), or by EVALSHA on a server that runs none of our functions, and
// by EVAL when the server has lost it (NOSCRIPT, function not found: a
// restarted server, SCRIPT or FUNCTION FLUSH, a failover): see scripter.
// Its source, hash and place are boxed once, so a call boxes none of them.
type luaScript struct {
	file           string // its file in lua/
	body           string // the file, as the library's function runs it
	src, hash      string // the script as EVAL runs it, and its SHA1
	srcArg, shaArg any
	idx            int // its index in scripts, and so in the library
}

// scripts is every script the package made: the function library holds
// them all. It is written only while the package's variables are
// initialised.
var scripts []*luaScript

// newLuaScript makes the script of file whose body the library runs and
// whose source EVAL runs.
func newLuaScript(file, body, src string) *luaScript {
	h := sha1.Sum([]byte(src))
	s := &luaScript{file: file, body: body, src: src, hash: hex.EncodeToString(h[:]), idx: len(scripts)}
	s.srcArg, s.shaArg = s.src, s.hash
	scripts = append(scripts, s)
	return s
}

// scriptCall is one invocation of a script: the whole command, built as
// EVALSHA ("evalsha", hash, number of keys, keys, arguments); a scripter
// sends it as FCALL (the function's name in place of the hash) where it can.
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

// evalArgs is the call as EVAL (a copy: the call's own form stays as it is).
func (sc scriptCall) evalArgs() []any {
	a := make([]any, len(sc.args))
	copy(a, sc.args)
	a[0], a[1] = "eval", sc.s.srcArg
	return a
}

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

// callSettled is callInt for a release or an extension on a Redis Cluster
// whose slot may be moving: a reply that says the script did not run (a slot
// being resharded, a redirect go-redis gave up following, an electing
// cluster: clusterPassing) sends it again every clusterRetry, so a resend
// never applies it twice. It stops at ctx's end, and within unlockTimeout
// when ctx has no deadline, returning the last error.
func (c *Client) callSettled(ctx context.Context, sc scriptCall) (int64, error) {
	n, err := c.callInt(ctx, sc)
	if err == nil || !clusterPassing(err) {
		return n, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, unlockTimeout)
		defer cancel()
	}
	t := time.NewTimer(clusterRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return n, err
		case <-t.C:
		}
		if n, err = c.callInt(ctx, sc); err == nil || !clusterPassing(err) {
			return n, err
		}
		t.Reset(clusterRetry)
	}
}
