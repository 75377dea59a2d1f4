package protocol

import (
	"testing"
	"time"
)

// When the budget is smaller than the nodes that want it, the units rotate:
// every node that waits gets a connection within three leases.
func TestUnitsRotateWhenNodesOutnumberTheBudget(t *testing.T) {
	const budget, nodes, route = 3, 10, "http://10.0.0.1:80"
	f := newFleet(t, 1, nodes, budget)
	got := map[NodeID]bool{}
	held := map[NodeID]int{}
	for _, n := range f.order {
		f.use(n, route, 0, 2)
	}
	for range 3 * DefaultLease / (50 * time.Millisecond) {
		f.step(50 * time.Millisecond)
		// Each node's pool follows its share: it opens up to it, and
		// closes what is above it at once (its requests are short).
		for _, n := range f.order {
			s := f.shares[n][route]
			if held[n] != min(s, 2) {
				held[n] = min(s, 2)
				f.use(n, route, held[n], 2-held[n])
			}
			if held[n] > 0 {
				got[n] = true
			}
		}
		sum := 0
		for _, h := range held {
			sum += h
		}
		if sum > budget {
			t.Fatalf("at %v the nodes hold %d, budget %d", f.now.Sub(t0), sum, budget)
		}
	}
	for _, n := range f.order {
		if !got[n] {
			t.Errorf("%s never got a connection within three leases", n)
		}
	}
}
