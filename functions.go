package dlock

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// On Redis 7 every script of the package runs as a function of one library
// (FUNCTION LOAD once, FCALL per call): a call then costs the server less
// than EVALSHA (no script body to set up, the libraries' functions made
// once at load instead of on every call; about 9% of a Mutex
// acquire+release, counted in instructions). The library is named after
// the hash of its source, and so are its functions, so two versions of
// dlock that share a Redis keep their own.

// library is the package's scripts as one function library.
type library struct {
	name  string // dlock_<hash>
	src   string // what FUNCTION LOAD takes
	names []any  // the function of scripts[i], by name (boxed once)
}

// libName stands for the library's name in its source until the hash of
// that source names it.
const libName = "@@dlock@@"

// libFiles are the library files every function may use, in the order
// they depend on one another.
var libFiles = []string{"fence.lua", "lib.lua", "reentrant_hash.lua", "queue_lib.lua", "mutex_lib.lua", "reentrant_lib.lua", "rw_lib.lua", "inspect_lib.lua"}

// functions returns the library, made on first use (every script exists by
// then: they are package variables).
var functions = sync.OnceValue(func() *library {
	var b strings.Builder
	for _, f := range libFiles {
		b.WriteString(readLua(f))
		b.WriteString("\n")
	}
	for _, s := range scripts {
		// A function that may grant is refused at its start when Redis is
		// out of memory (as a script's first write is); one that frees,
		// extends or reads runs then too.
		flags := "'allow-oom'"
		if strings.Contains(s.file, "acquire") || s.file == "sem_set_permits.lua" {
			flags = ""
		}
		fmt.Fprintf(&b, "redis.register_function{function_name = '%s_%s', flags = {%s}, callback = function(KEYS, ARGV)\n%s\nend}\n",
			libName, strings.TrimSuffix(s.file, ".lua"), flags, s.body)
	}
	h := sha1.Sum([]byte(b.String()))
	lib := &library{name: "dlock_" + hex.EncodeToString(h[:8])}
	lib.src = "#!lua name=" + lib.name + "\n" + strings.ReplaceAll(b.String(), libName, lib.name)
	for _, s := range scripts {
		lib.names = append(lib.names, lib.name+"_"+strings.TrimSuffix(s.file, ".lua"))
	}
	return lib
})

// lostScript reports whether err says the server ran a call's script or
// function not: it lost it (NOSCRIPT, function not found) or it runs no
// functions of ours (a Redis before 7.0, an ACL that denies FCALL).
func lostScript(err error) bool {
	return err != nil && (redis.HasErrorPrefix(err, "NOSCRIPT") || missingFunction(err) || refusedFunctions(err))
}

func missingFunction(err error) bool {
	return redis.HasErrorPrefix(err, "Function not found")
}

func refusedFunctions(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := strings.ToLower(rerr.Error())
	return (strings.HasPrefix(msg, "err unknown command") && strings.Contains(msg, "fcall")) ||
		(strings.HasPrefix(msg, "noperm") && (strings.Contains(msg, "fcall") || strings.Contains(msg, "function")))
}
