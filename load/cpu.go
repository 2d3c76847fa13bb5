package load

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcessCPU returns the CPU time (user + system) a process has used so
// far, from /proc (Linux).
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("load: cpu of %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces: count from its end.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("load: cpu of %d: unreadable stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("load: cpu of %d: short stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("load: cpu of %d: unreadable stat", pid)
	}
	const tick = 100 // USER_HZ, 100 on every Linux ABI Go supports
	return time.Duration(utime+stime) * time.Second / tick, nil
}

// SelfCPU returns this process's CPU time (user + system) so far.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
