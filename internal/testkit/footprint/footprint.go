// Package footprint measures what a pool holds in memory, for the tests and
// runs of bounded memory: the live heap and stacks after a full collection,
// the goroutines, and the actors of an actor system. Warm pays in advance
// what a process pays once and keeps (the actor system's registry shards,
// the runtime's goroutine records), so that a measurement counts only what
// its subject leaves behind.
package footprint

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
)

// Footprint is one measurement.
type Footprint struct {
	Heap, Stack uint64 // live heap and stacks in use, after a full collection (bytes)
	Goroutines  int
	Actors      int // actors registered in the system (0 without one)
}

// Take measures the process, and the actors of sys (nil = none).
func Take(sys *actor.ActorSystem) Footprint {
	heap, stack := Live()
	return Footprint{Heap: heap, Stack: stack, Goroutines: runtime.NumGoroutine(), Actors: Actors(sys)}
}

func (f Footprint) String() string {
	return fmt.Sprintf("heap %.1f MB, stacks %.1f MB, %d goroutines, %d actors",
		float64(f.Heap)/1e6, float64(f.Stack)/1e6, f.Goroutines, f.Actors)
}

// Within reports whether f's heap and goroutines are within ratio (0.1 =
// 10%) above base's, and its actors no more than base's.
func (f Footprint) Within(base Footprint, ratio float64) bool {
	return float64(f.Heap) <= (1+ratio)*float64(base.Heap) &&
		float64(f.Goroutines) <= (1+ratio)*float64(base.Goroutines) && f.Actors <= base.Actors
}

// Live returns the live heap and the stacks in use after a full collection.
func Live() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// Actors counts the actors registered in sys.
func Actors(sys *actor.ActorSystem) int {
	if sys == nil {
		return 0
	}
	n := 0
	for _, m := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		n += m.Count()
	}
	return n
}

// Warm pays what a process that has run many actors and goroutines has paid
// once, and keeps for good:
//
//   - the actor system's process registry has 32,768 shards (1,024 maps of
//     32), each a Go map that keeps the memory of its first entry (a map never
//     shrinks): a process that has run a few hundred thousand actors holds
//     about 9 MB there, whatever runs now. Warm puts a key in every shard and
//     takes it out again;
//   - the runtime keeps the record of every goroutine it ran at once, for
//     the next ones. Warm runs goroutines goroutines at once.
func Warm(sys *actor.ActorSystem, goroutines int) {
	if sys != nil {
		maps := sys.ProcessRegistry.LocalPIDs.LocalPIDs
		// A key's shard within a map depends on the key only: one key per
		// shard of the first map is one per shard of every map.
		var keys []string
		seen := map[any]bool{}
		for i := 0; len(seen) < len(maps[0]); i++ {
			k := fmt.Sprint("warm-", i)
			if sh := maps[0].GetShard(k); !seen[sh] {
				seen[sh] = true
				keys = append(keys, k)
			}
		}
		for _, m := range maps {
			for _, k := range keys {
				m.Set(k, struct{}{})
				m.Remove(k)
			}
		}
	}
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() { <-release })
	}
	close(release)
	wg.Wait()
}
