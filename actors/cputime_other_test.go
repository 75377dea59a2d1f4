//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package actors

import "time"

// cpuTime cannot read the process's CPU time here.
func cpuTime() (time.Duration, bool) { return 0, false }
