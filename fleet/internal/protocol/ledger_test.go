package protocol

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// shrinkNode is a node as the ledger sees it: it enforces its last grant,
// closes what is above it at once, holds half of it when it renews (the rest
// it may open at any time), and renews at once when nudged.
type shrinkNode struct {
	id       NodeID
	budget   int
	enforced int // its share: it holds no more
	held     int
}

// A budget that shrinks (a configuration lowered, node by node or all at
// once) leaves the nodes holding more than the new budget: the ledger must
// count that as over the budget, grant no unit a node does not have until the
// sum is below the new budget (not even to a node that joins with the old
// budget meanwhile), and bring the nodes down to their fair parts of it.
func TestALedgerWhoseBudgetShrinksGrantsNothingNewUntilTheSumIsBelowIt(t *testing.T) {
	for _, tc := range []struct {
		from, to, nodes, need int
		rolling               bool // one node at a time takes the new budget
	}{
		{from: 12, to: 6, nodes: 3, need: 6, rolling: true},
		{from: 12, to: 6, nodes: 3, need: 6},
		{from: 30, to: 9, nodes: 3, need: 20, rolling: true},
		{from: 12, to: 4, nodes: 2, need: 12},
		{from: 40, to: 3, nodes: 4, need: 10},
	} {
		name := fmt.Sprintf("%d to %d, %d nodes, rolling %v", tc.from, tc.to, tc.nodes, tc.rolling)
		t.Run(name, func(t *testing.T) {
			l := NewLedger("r")
			now := t0
			c := applyCtx{lease: DefaultLease, turn: DefaultLease / 3, retry: DefaultLease / 8, floor: 0}
			nodes := make([]*shrinkNode, tc.nodes)
			for i := range nodes {
				nodes[i] = &shrinkNode{id: NodeID(fmt.Sprintf("n%d", i)), budget: tc.from}
			}
			byID := map[NodeID]*shrinkNode{}
			var renew func(n *shrinkNode) Grant
			renew = func(n *shrinkNode) Grant {
				byID[n.id] = n
				c.now = now
				g, nudged := l.apply(n.id, n.budget, Entry{Has: n.enforced, Held: n.held, Need: tc.need, Want: tc.need}, c)
				if g.Grant > n.enforced && l.Committed() > g.Budget {
					t.Fatalf("%s was granted %d, above the %d it had, with %d committed of a budget of %d: %s",
						n.id, g.Grant, n.enforced, l.Committed(), g.Budget, l)
				}
				n.enforced = g.Grant
				n.held = (g.Grant + 1) / 2
				for _, id := range nudged {
					renew(byID[id]) // a nudged node renews at once
				}
				return g
			}
			sum := func() (enforced int) {
				for _, n := range nodes {
					enforced += n.enforced
				}
				return enforced
			}
			for range 4 {
				for _, n := range nodes {
					renew(n)
				}
				now = now.Add(DefaultLease / 3)
			}
			if s := sum(); s != tc.from || l.Committed() != tc.from {
				t.Fatalf("before the change the nodes hold %d, the ledger counts %d; want the whole budget %d", s, l.Committed(), tc.from)
			}

			// The budget shrinks.
			for i, n := range nodes {
				if tc.rolling && i > 0 {
					break
				}
				n.budget = tc.to
			}
			for round := range 10 {
				if round == 1 {
					// A node joins that the change has not reached.
					nodes = append(nodes, &shrinkNode{id: "late", budget: tc.from})
				}
				for i, n := range nodes {
					if tc.rolling && i == round || n.id == "late" && round == 5 {
						n.budget = tc.to // the change reaches the next node
					}
					g := renew(n)
					if g.Budget != tc.to {
						t.Fatalf("round %d: %s's grant says a budget of %d, want the new %d", round, n.id, g.Budget, tc.to)
					}
					// What the nodes may use is never counted as less: a
					// ledger over the budget says so.
					if s := sum(); l.Committed() < s {
						t.Fatalf("round %d: the nodes may use %d, the ledger counts only %d: %s", round, s, l.Committed(), l)
					}
				}
				now = now.Add(DefaultLease / 3)
			}
			if l.Committed() > tc.to {
				t.Fatalf("after ten rounds the ledger counts %d, above the new budget %d: %s", l.Committed(), tc.to, l)
			}
			// The needs exceed the budget: it is all counted (a unit that
			// rotates is counted for the node that gives it up until it
			// confirms), each node's part the level or one more.
			level := tc.to / len(nodes)
			if l.Committed() != tc.to {
				t.Errorf("the ledger ended counting %d, want the whole new budget %d: %s", l.Committed(), tc.to, l)
			}
			for _, n := range nodes {
				if n.enforced < level || n.enforced > level+1 {
					t.Errorf("%s ended with %d, want its fair part of %d (%d or %d): %s", n.id, n.enforced, tc.to, level, level+1, l)
				}
			}
		})
	}
}

// renewals12 returns a ledger of budget 12 and a function that applies a
// node's renewal to it (wanting what it needs), a millisecond after the
// last.
func renewals12() (*Ledger, func(n NodeID, has, held, need int) (Grant, []NodeID)) {
	l := NewLedger("r")
	now := t0
	c := applyCtx{lease: DefaultLease, turn: DefaultLease / 3, retry: DefaultLease / 8}
	return l, func(n NodeID, has, held, need int) (Grant, []NodeID) {
		now = now.Add(time.Millisecond)
		c.now = now
		return l.apply(n, 12, Entry{Has: has, Held: held, Need: need, Want: need}, c)
	}
}

// A node waiting for its fair part is nudged for each unit that comes free,
// not once per retry gap: nudged for the first units the others give back,
// it comes and takes them, and is nudged again when more come free soon
// after, rather than waiting out its RetryAfter for them.
func TestALedgerNudgesAWaitingNodeAgainOnceItTookWhatItWasNudgedFor(t *testing.T) {
	l, apply := renewals12()
	apply("a", 0, 0, 6)
	apply("b", 0, 0, 6)
	if g, _ := apply("c", 0, 0, 6); g.Grant != 0 {
		t.Fatalf("c was granted %d of a budget a and b hold, want 0", g.Grant)
	}
	// a shrinks to its fair part, 4, then gives 2 back: c is nudged for them.
	apply("a", 6, 6, 6)
	if _, nudged := apply("a", 4, 4, 6); !slices.Contains(nudged, NodeID("c")) {
		t.Fatalf("a gave 2 back and the ledger nudged %v, want c", nudged)
	}
	if g, _ := apply("c", 0, 0, 6); g.Grant != 2 {
		t.Fatalf("c came and was granted %d, want the 2 a gave back", g.Grant)
	}
	// b does the same a few milliseconds later: c is nudged again.
	apply("b", 6, 6, 6)
	if _, nudged := apply("b", 4, 4, 6); !slices.Contains(nudged, NodeID("c")) {
		t.Fatalf("b gave 2 back soon after c was nudged, and the ledger nudged %v, want c again", nudged)
	}
	if g, _ := apply("c", 2, 2, 6); g.Grant != 4 {
		t.Fatalf("c came again and was granted %d, want its fair part, 4", g.Grant)
	}
	if got := l.Committed(); got != 12 {
		t.Fatalf("the ledger counts %d, want the budget, 12", got)
	}
}

// A node nudged for a unit that another takes first (a node new to the
// ledger is granted what is free) is nudged again for the next unit that
// comes free, once it has come, rather than waiting out its RetryAfter.
func TestALedgerNudgesAWaitingNodeAgainAfterAnotherTookItsUnit(t *testing.T) {
	_, apply := renewals12()
	apply("a", 0, 0, 6)
	apply("b", 0, 0, 6)
	apply("c", 0, 0, 6)
	apply("a", 6, 6, 6)
	if _, nudged := apply("a", 5, 5, 6); !slices.Contains(nudged, NodeID("c")) {
		t.Fatalf("a gave a unit back and the ledger nudged %v, want c", nudged)
	}
	if g, _ := apply("d", 0, 0, 6); g.Grant != 1 {
		t.Fatalf("d, new, was granted %d, want the free unit", g.Grant)
	}
	if g, _ := apply("c", 0, 0, 6); g.Grant != 0 {
		t.Fatalf("c came after d and was granted %d, want 0", g.Grant)
	}
	if _, nudged := apply("a", 4, 4, 6); !slices.Contains(nudged, NodeID("c")) {
		t.Fatalf("a gave another unit back soon after and the ledger nudged %v, want c again", nudged)
	}
	if g, _ := apply("c", 0, 0, 6); g.Grant != 1 {
		t.Fatalf("c came again and was granted %d, want the unit a gave back", g.Grant)
	}
}
