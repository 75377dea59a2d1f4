package faultserver

import (
	"os"
	"runtime"
)

// Resources is a count of the process's open file descriptors and goroutines.
type Resources struct {
	FDs        int // entries of /proc/self/fd (-1 where there is no /proc)
	Goroutines int
}

// Measure counts the process's descriptors and goroutines now.
func Measure() Resources {
	fds := -1
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		fds = len(ents) - 1 // ReadDir's own descriptor is listed while it reads
	}
	return Resources{FDs: fds, Goroutines: runtime.NumGoroutine()}
}

// AtMost reports whether r is back to (or below) base: no descriptor and no
// goroutine more.
func (r Resources) AtMost(base Resources) bool {
	return r.FDs <= base.FDs && r.Goroutines <= base.Goroutines
}
