//go:build !linux

package fleetsim

import "time"

var wallStart = time.Now()

// threadCPU falls back to the wall clock where a thread's CPU time cannot be
// read: a host's work then includes whatever preempts it.
func threadCPU() time.Duration { return time.Since(wallStart) }

// cpuClock names what threadCPU reads, for the reports.
const cpuClock = "wall clock"
