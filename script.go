package dlock

import (
	"crypto/sha1"
	"encoding/hex"
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
