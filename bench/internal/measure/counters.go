package measure

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// harnessCommands are the commands the harness itself sends (snapshots,
// cleanup between runs); they are not counted against a library.
var harnessCommands = map[string]bool{"info": true, "flushall": true, "config|resetstat": true, "config": true}

// RedisCommands returns the calls per command name on one server, from
// INFO commandstats. Commands run inside Lua scripts are counted too (as
// Redis counts them), so a script call costs 1 + what it runs.
func RedisCommands(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("measure: INFO commandstats: %w", err)
	}
	out := make(map[string]int64)
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("measure: bad commandstats line %q", line)
		}
		out[name] = n
	}
	return out, nil
}

// Process is a snapshot of this process's own counters.
type Process struct {
	At         time.Time
	Mallocs    uint64
	Goroutines int
}

// ReadProcess snapshots the allocation count (runtime.MemStats.Mallocs:
// stops the world briefly) and the goroutine count.
func ReadProcess() Process {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Process{At: time.Now(), Mallocs: ms.Mallocs, Goroutines: runtime.NumGoroutine()}
}

// CommandDelta returns after - before per command, dropping the harness's
// own commands and zero deltas, and the total.
func CommandDelta(before, after map[string]int64) (map[string]int64, int64) {
	d := make(map[string]int64)
	var total int64
	for name, n := range after {
		if harnessCommands[name] {
			continue
		}
		if x := n - before[name]; x != 0 {
			d[name] = x
			total += x
		}
	}
	return d, total
}
