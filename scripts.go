package dlock

import (
	"context"
	"embed"
	"strings"

	"github.com/dlockgo/dlock/seam"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// Scripts are immutable after package initialisation; each carries its SHA1
// and runs by EVALSHA, falling back to EVAL when the server answers NOSCRIPT
// (a restarted server, SCRIPT FLUSH, a failover): see luaScript.
var (
	mutexAcquire     = queued("mutex_acquire.lua", "mutex_lib.lua")
	mutexRelease     = queued("mutex_release.lua", "mutex_lib.lua")
	mutexLeave       = queued("mutex_leave.lua", "mutex_lib.lua")
	mutexExtend      = plain("mutex_extend.lua")
	reentrantAcquire = queued("reentrant_acquire.lua", "reentrant_lib.lua")
	reentrantRelease = queued("reentrant_release.lua", "reentrant_lib.lua")
	reentrantLeave   = queued("reentrant_leave.lua", "reentrant_lib.lua")
	lockExtend       = plain("lock_extend.lua")
	serverTime       = withLibs("server_time.lua", "lib.lua")
	zsetLive         = withLibs("zset_live.lua", "lib.lua") // a member of a zset of expiries is live (RWLock readers, Semaphore permits)
)

func readLua(name string) string {
	b, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic(err) // embedded at build time: a missing file is a build error
	}
	return string(b)
}

// plain is a script used as it is.
func plain(name string) *luaScript {
	src := readLua(name)
	return newLuaScript(name, src, src)
}

// queued is a script of a lock with a waiter queue: fence.lua, queue_lib.lua
// and the shape's own library are prepended (and lib.lua for the reentrant
// shapes, which use keep). Every prepended function is created anew on each
// call, so a script gets only the libraries it uses.
func queued(name, lib string) *luaScript {
	if lib == "reentrant_lib.lua" {
		return withLibs(name, "fence.lua", "lib.lua", "reentrant_hash.lua", "queue_lib.lua", lib)
	}
	return withLibs(name, "fence.lua", "queue_lib.lua", lib)
}

// withLibs is the script name with library files (fence.lua, lib.lua, ...:
// local functions, not scripts of their own) prepended in the order given.
// A script with a "--@libraries" line gets every library but the head
// libraries there instead: the path above that line (a free lock's grant,
// an unwaited release) runs before the other libraries' functions are
// defined, and pays for none of them.
func withLibs(name string, libs ...string) *luaScript {
	src := readLua(name)
	head, tail, split := strings.Cut(src, libMarker)
	body := head + tail
	var b strings.Builder
	for _, l := range libs {
		if split && !headLibs[l] {
			continue
		}
		b.WriteString(readLua(l))
		b.WriteString("\n")
	}
	if !split {
		b.WriteString(src)
		return newLuaScript(name, body, b.String())
	}
	b.WriteString(head)
	for _, l := range libs {
		if !headLibs[l] {
			b.WriteString(readLua(l))
			b.WriteString("\n")
		}
	}
	b.WriteString(tail)
	return newLuaScript(name, body, b.String())
}

// headLibs are the small libraries a fast path may use: they are defined
// before the "--@libraries" line too.
var headLibs = map[string]bool{"fence.lua": true, "lib.lua": true, "reentrant_hash.lua": true}

// libMarker is the line where a script wants its libraries (see withLibs).
const libMarker = "--@libraries\n"

// redisErr wraps an error from Redis for operation op on lock name: WRONGTYPE
// becomes ErrWrongType, a script's UPGRADE reply ErrUpgrade, a cancelled or
// expired ctx keeps its ctx.Err().
func redisErr(ctx context.Context, op, shape, name string, err error) error {
	return seam.StoreErr(ctx, op, shape, name, redisCause(err))
}
