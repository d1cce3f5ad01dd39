package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPU returns the CPU time (user + system) process pid has used so far, from
// /proc/<pid>/stat, in clock ticks of 10 ms (USER_HZ is 100 on Linux).
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 || i+2 > len(s) {
		return 0, fmt.Errorf("proc: stat of %d: %q", pid, s)
	}
	f := strings.Fields(s[i+2:])
	if len(f) < 13 {
		return 0, fmt.Errorf("proc: stat of %d: %q", pid, s)
	}
	// After the state (f[0]): utime and stime are fields 14 and 15 of stat.
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("proc: stat of %d: %q", pid, s)
	}
	return time.Duration(u+k) * 10 * time.Millisecond, nil
}
