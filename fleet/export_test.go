package fleet

import (
	"time"

	"github.com/asynkron/protoactor-go/cluster"
)

// CallGrain makes one grain call as a keeper does, for node (a made-up
// keeper id on c's member) with sequence number seq, and returns the grant.
func CallGrain(c *cluster.Cluster, route, node string, seq uint64) (int, error) {
	req := shareRequest{Route: route, Node: nodeID{Address: c.ActorSystem.Address(), ID: node}, Seq: seq, Budget: 1000, Want: 1}
	s, err := clusterGranter{c}.call(route, req.proto(), 5*time.Second)
	if err != nil {
		return 0, err
	}
	resp, err := decodeShareResponse(s)
	return resp.Grant, err
}

// Crash stops k as a process that dies would: no release, no last word to
// the supervisor. Calls in flight end by themselves; Crash waits for them.
func Crash(k *Keeper) {
	k.stopOnce.Do(func() {
		k.stopping.Store(true)
		if k.sub != nil {
			k.sys.EventStream.Unsubscribe(k.sub)
		}
		close(k.stopTick)
		k.sys.Root.Stop(k.pid)
	})
	<-k.done // from here on nothing adds to the workers
	k.workers.Wait()
}
