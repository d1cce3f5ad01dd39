package servers

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/PID/stat times; 100 on every Linux
// architecture Go supports.
const clockTick = 100

// ProcessCPU returns the user+system CPU time a process has used so far,
// from /proc/PID/stat (10 ms resolution).
func ProcessCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("servers: cpu of %d: %w", pid, err)
	}
	// Fields after the command name (which may hold spaces) start after ')'.
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("servers: cpu of %d: short stat line", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14 of stat(5)
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("servers: cpu of %d: bad stat line", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTick, nil
}

// SelfCPU returns the user+system CPU time this process has used so far
// (getrusage; microsecond resolution).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
