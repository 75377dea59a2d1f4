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

// When every node asks at once for a budget smaller than the nodes, the
// units they take together do not all come free together turn after turn:
// each handover leaves a unit idle for a moment (the holder closes, renews,
// the next one is nudged, renews and dials), and a wave of them leaves the
// budget idle at once. The turns are staggered, and a holder gives its unit
// up when its turn ends, not at its next renewal, so the handovers spread.
func TestUnitsTakenTogetherComeFreeAtDifferentMoments(t *testing.T) {
	const budget, nodes, route = 12, 40, "http://10.0.0.1:80"
	f := newFleet(t, 1, nodes, budget)
	for _, n := range f.order {
		f.want(n, route, 1)
	}
	f.run(DefaultLease, f.within(route, budget)) // every node asked, the units went round once
	held := map[NodeID]int{}
	for _, n := range f.order {
		held[n] = f.held[n][route]
	}
	most, handovers := 0, 0
	check := f.within(route, budget)
	f.run(3*DefaultLease, func() {
		check()
		freed := 0
		for _, n := range f.order {
			if h := f.held[n][route]; h < held[n] {
				freed++
			}
			held[n] = f.held[n][route]
		}
		most = max(most, freed)
		handovers += freed
	})
	if handovers < budget {
		t.Fatalf("%d handovers in three leases, want the units to go round (at least %d)", handovers, budget)
	}
	if most > budget/3 {
		t.Errorf("%d of the %d units came free in one tick (%d handovers in three leases), want at most %d", most, budget, handovers, budget/3)
	}
}
