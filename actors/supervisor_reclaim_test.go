package actors

import (
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// protoactor's process registry keeps every actor in one of 32,768 Go maps,
// each of which keeps the room of the most actors it held (a Go map never
// shrinks): compactRegistry rebuilds them at the size of what they hold.
// Checked on the pinned protoactor's layout (it reports that it could), with
// the heap it gives back after 20,000 actors were started and stopped in a
// system that started cold, and with the registry still right afterwards:
// the actors left are found and answer, stop and leave it, and new ones join
// it.
func TestCompactRegistry(t *testing.T) {
	const n, left = 20_000, 10
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	echo := actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(chan struct{}); ok {
			m <- struct{}{}
		}
	})
	heap0, _ := liveHeap()
	pids := make([]*actor.PID, n)
	for i := range pids {
		pids[i] = sys.Root.Spawn(echo)
	}
	for _, pid := range pids[left:] {
		if err := sys.Root.StopFuture(pid).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	clear(pids[left:]) // a PID keeps its process, and the actor, reachable
	pids = pids[:left]
	registered := func() int {
		k := 0
		for _, m := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
			k += m.Count()
		}
		return k
	}
	base := registered() - left // the system's own actors (its dead letters, its event stream)
	before, _ := liveHeap()
	if !compactRegistry(sys) {
		t.Fatal("compactRegistry found no registry shard's map: protoactor's registry is laid out otherwise")
	}
	after, _ := liveHeap()
	// The first actor a shard holds gives its map a group of slots (about
	// 300 bytes) that the map keeps once empty: 20,000 actors touch nearly
	// half of the 32,768 shards, about 4.5 MB of the heap.
	t.Logf("heap %d KB before the actors, %d KB after they stopped, %d KB after the rebuild", heap0>>10, before>>10, after>>10)
	if before < after || before-after < 2<<20 {
		t.Fatalf("the rebuild gave back %d bytes of the heap (%d before it, %d after, %d before the actors); want more than 2 MiB",
			int64(before)-int64(after), before, after, heap0)
	}
	if kept := int64(after) - int64(heap0); kept > 1<<20 {
		t.Fatalf("after the rebuild the heap is %d bytes over where it was before the actors; want less than 1 MiB", kept)
	}
	ask := func(pid *actor.PID) {
		t.Helper()
		if _, ok := sys.ProcessRegistry.Get(pid); !ok {
			t.Fatalf("%s is no longer registered after the rebuild", pid.Id)
		}
		done := make(chan struct{}, 1)
		sys.Root.Send(pid, done)
		<-done
	}
	for _, pid := range pids {
		ask(pid)
	}
	pid := sys.Root.Spawn(echo)
	ask(pid)
	for _, pid := range append(pids, pid) {
		if err := sys.Root.StopFuture(pid).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if got := registered(); got != base {
		t.Fatalf("%d actors registered once every one started here stopped; want the system's own %d", got, base)
	}
}
