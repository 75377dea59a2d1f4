package main

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// machineBusy returns the CPU time all processes have used since boot (user,
// nice, system, irq, softirq, steal from /proc/stat), or -1 where there is no
// /proc/stat.
func machineBusy() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return -1
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} { // user nice system irq softirq steal
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return -1
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick
}

// processCPU returns the user+system CPU time process pid has used (from
// /proc/pid/stat), or -1.
func processCPU(pid int) time.Duration {
	if pid <= 0 {
		return -1
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces: fields count from its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state); utime is field 14, stime 15
	if len(f) < 13 {
		return -1
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(u+st) * clockTick
}
