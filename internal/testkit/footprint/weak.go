package footprint

import (
	"runtime"
	"weak"
)

// Kept returns how many of weaks still point to a value after up to ten
// full collections (a collection clears a weak pointer to what is no longer
// reachable; it returns as soon as none is left): what something still
// holds. The values must not be held by the caller's own stack.
func Kept[T any](weaks []weak.Pointer[T]) int {
	kept := reachable(weaks)
	for i := 0; i < 10 && kept > 0; i++ {
		runtime.GC()
		kept = reachable(weaks)
	}
	return kept
}

func reachable[T any](weaks []weak.Pointer[T]) int {
	n := 0
	for _, w := range weaks {
		if w.Value() != nil {
			n++
		}
	}
	return n
}
