package fleetsim

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time (user and system) of the calling thread
// (the run locks its goroutine to one): what a host's work costs, whatever
// else this machine runs meanwhile.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuClock names what threadCPU reads, for the reports.
const cpuClock = "thread CPU time"
