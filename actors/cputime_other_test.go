//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package actors

import "time"

// cpuTime cannot read the process's CPU time here.
func cpuTime() (time.Duration, bool) { return 0, false }

// usage cannot read the process's CPU time here.
func usage() (time.Duration, int64, bool) { return 0, 0, false }
