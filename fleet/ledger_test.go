package fleet

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

const testLease = 3 * time.Second

func node(n string) nodeID { return nodeID{Address: "127.0.0.1:1", ID: n} }

// asker sends requests for one node with growing sequence numbers.
type asker struct {
	id  nodeID
	seq uint64
}

func (a *asker) ask(l *ledger, at time.Time, has, held, want int) (shareResponse, []nodeID) {
	a.seq++
	return l.apply(at, shareRequest{Route: "r", Node: a.id, Seq: a.seq, Budget: 10, Has: has, Held: held, Want: want})
}

func TestLedgerInSafeModeGrantsNoMoreThanNodesReportHaving(t *testing.T) {
	l := newLedger(t0, testLease)
	a, b := &asker{id: node("a")}, &asker{id: node("b")}

	resp, _ := a.ask(l, t0.Add(time.Second), 6, 6, 10)
	if resp.Grant != 6 || resp.Safe != 2*time.Second {
		t.Fatalf("a holding 6 in safe mode: got %+v, want grant 6, 2s of safe mode left", resp)
	}
	resp, _ = b.ask(l, t0.Add(time.Second), 0, 0, 10)
	if resp.Grant != 0 || resp.RetryAfter != 2*time.Second {
		t.Fatalf("b holding nothing in safe mode: got %+v, want grant 0 and retry at the end of safe mode", resp)
	}
	resp, _ = a.ask(l, t0.Add(2*time.Second), 6, 6, 3)
	if resp.Grant != 3 {
		t.Fatalf("a shrinking in safe mode: got %+v, want grant 3", resp)
	}
	// After one lease, the ledger knows every lease there is.
	resp, _ = b.ask(l, t0.Add(testLease), 0, 0, 10)
	if resp.Safe != 0 || resp.Grant != 4 {
		t.Fatalf("b after safe mode, a counted at 6 until it confirms: got %+v, want grant 4", resp)
	}
}

func TestLedgerCountsAShrinkOnlyOnceTheNodeConfirmsIt(t *testing.T) {
	l := newLedger(t0, testLease)
	at := t0.Add(testLease)
	a, b := &asker{id: node("a")}, &asker{id: node("b")}

	if resp, _ := a.ask(l, at, 0, 0, 10); resp.Grant != 10 {
		t.Fatalf("a alone: got %+v, want the whole budget", resp)
	}
	resp, nudge := b.ask(l, at, 0, 0, 10)
	if resp.Grant != 0 || len(nudge) != 1 || nudge[0] != a.id || resp.RetryAfter == 0 {
		t.Fatalf("b while a holds all: got %+v, nudge %v; want 0, a nudged, a retry hint", resp, nudge)
	}
	// a learns it must shrink to 5 but still enforces 10 and holds 9.
	if resp, _ := a.ask(l, at, 10, 9, 10); resp.Grant != 5 {
		t.Fatalf("a over its fair share: got %+v, want 5", resp)
	}
	if resp, _ := b.ask(l, at, 0, 0, 10); resp.Grant != 0 {
		t.Fatalf("b before a confirmed: got %+v, want 0 (a still counts 10)", resp)
	}
	// a now enforces 5 but 7 requests are still in flight.
	resp, nudge = a.ask(l, at, 5, 7, 10)
	if resp.Grant != 5 || len(nudge) != 1 || nudge[0] != b.id {
		t.Fatalf("a confirming with 7 held: got %+v, nudge %v; want 5 and b nudged", resp, nudge)
	}
	if resp, _ := b.ask(l, at.Add(testLease/10), 0, 0, 10); resp.Grant != 3 {
		t.Fatalf("b while a holds 7: got %+v, want 3", resp)
	}
	a.ask(l, at, 5, 5, 10)
	if resp, _ := b.ask(l, at.Add(testLease/10), 3, 3, 10); resp.Grant != 5 {
		t.Fatalf("b after a drained: got %+v, want its fair 5", resp)
	}
}

func TestLedgerIgnoresRequestsOvertakenByNewerOnes(t *testing.T) {
	l := newLedger(t0, testLease)
	at := t0.Add(testLease)
	req := shareRequest{Route: "r", Node: node("a"), Seq: 2, Budget: 10, Has: 0, Want: 8}
	if resp, _ := l.apply(at, req); resp.Grant != 8 {
		t.Fatalf("got %+v, want 8", resp)
	}
	old := req
	old.Seq, old.Want = 1, 1
	if resp, _ := l.apply(at, old); !resp.Stale || resp.Grant != 8 {
		t.Fatalf("older request: got %+v, want stale", resp)
	}
}

func TestLedgerForgetsExpiredLeasesAndIdleNodes(t *testing.T) {
	l := newLedger(t0, testLease)
	at := t0.Add(testLease)
	a, b := &asker{id: node("a")}, &asker{id: node("b")}
	a.ask(l, at, 0, 0, 10)
	// a never renews: after its lease b may have everything.
	if resp, _ := b.ask(l, at.Add(testLease), 0, 0, 10); resp.Grant != 10 || resp.Nodes != 1 {
		t.Fatalf("after a's lease expired: got %+v, want 10 for b alone", resp)
	}
	// b gives everything back and is forgotten.
	if resp, _ := b.ask(l, at.Add(testLease), 0, 0, 0); resp.Grant != 0 || resp.Nodes != 0 {
		t.Fatalf("b released: got %+v, want 0 with no nodes left", resp)
	}
}

func TestLedgerUsesTheSmallestBudgetAnyNodeAsksFor(t *testing.T) {
	l := newLedger(t0, testLease)
	at := t0.Add(testLease)
	l.apply(at, shareRequest{Route: "r", Node: node("a"), Seq: 1, Budget: 10, Want: 2})
	resp, _ := l.apply(at, shareRequest{Route: "r", Node: node("b"), Seq: 1, Budget: 4, Want: 10})
	if resp.Budget != 4 || resp.Grant != 2 {
		t.Fatalf("got %+v, want budget 4 and grant 2", resp)
	}
}

func TestLedgerInSafeModeGrantsANodeOnItsFloorThatFloor(t *testing.T) {
	l := newLedger(t0, testLease)
	req := shareRequest{Route: "r", Node: node("a"), Seq: 1, Budget: 12, Has: 0, Held: 4, Want: 10, Floor: 4}
	if resp, _ := l.apply(t0.Add(time.Second), req); resp.Grant != 4 {
		t.Fatalf("got %+v, want the floor 4", resp)
	}
	req.Seq, req.Floor = 2, 0
	if resp, _ := l.apply(t0.Add(time.Second), req); resp.Grant != 0 {
		t.Fatalf("off the floor, no lease: got %+v, want 0", resp)
	}
}

// A keeper runs several calls at once, so the grain may get a node's later
// request first. When that request gave everything back and the ledger forgot
// the node, the earlier one, arriving after it, is stale: it must not bring
// back the share the node gave up (a stopping node would hold it from the
// others until its lease ran out).
func TestLedgerDoesNotBringBackAForgottenNodeFromAnEarlierRequest(t *testing.T) {
	l := newLedger(t0, testLease)
	at := t0.Add(testLease)
	a, b := &asker{id: node("a")}, &asker{id: node("b")}
	if resp, _ := a.ask(l, at, 0, 0, 10); resp.Grant != 10 {
		t.Fatalf("a alone: got %+v, want the whole budget", resp)
	}
	a.seq++
	early := shareRequest{Route: "r", Node: a.id, Seq: a.seq, Budget: 10, Has: 10, Want: 10}
	if resp, _ := a.ask(l, at, 0, 0, 0); resp.Grant != 0 {
		t.Fatalf("a giving everything back: got %+v", resp)
	}
	if resp, _ := l.apply(at, early); !resp.Stale || resp.Grant != 0 {
		t.Fatalf("a's earlier request after a was forgotten: got %+v, want stale with no grant", resp)
	}
	if resp, _ := b.ask(l, at, 0, 0, 10); resp.Grant != 10 {
		t.Fatalf("b after a gave everything back: got %+v, want the whole budget", resp)
	}
	// A newer request of a's is served as a new node's, and after a lease the
	// ledger no longer remembers a at all.
	if resp, _ := a.ask(l, at.Add(testLease), 0, 0, 10); resp.Stale {
		t.Fatalf("a's next request: got %+v, want it served", resp)
	}
	if len(l.forgotten) != 0 {
		t.Fatalf("forgotten nodes left: %v", l.forgotten)
	}
}
