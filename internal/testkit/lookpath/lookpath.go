// Package lookpath finds a program by one of several names, for the tests'
// real components and the example programs that start them (it imports no
// testing package).
package lookpath

import (
	"os"
	"os/exec"
	"path/filepath"
)

// Find returns the path of the first of names found on PATH or, for an
// absolute name, on disk; "" when none is there.
func Find(names ...string) string {
	for _, n := range names {
		if filepath.IsAbs(n) {
			if _, err := os.Stat(n); err == nil {
				return n
			}
			continue
		}
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	return ""
}
