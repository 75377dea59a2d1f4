package actors

import (
	"errors"
	"testing"

	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

func TestRouteServesWaitersInArrivalOrder(t *testing.T) {
	p := newPool(t, 1, 8)
	h := p.route("a")
	held := p.lease(h, 1)[0]
	var waiters []*wait.Ticket[Lease]
	for i := 0; i < 5; i++ {
		waiters = append(waiters, p.ask(h))
	}
	if st := p.stats(h); st.Pending != 5 || st.Open != 1 {
		t.Fatalf("stats %+v", st)
	}
	for i, w := range waiters {
		if !p.waiting(h, w) {
			t.Fatalf("waiter %d served before a release", i)
		}
		p.release(h, true, held)
		held = p.leased(w)
		if !held.Reused || held.QueuePos != i+1 {
			t.Fatalf("waiter %d: %+v", i, held)
		}
		for j, later := range waiters[i+1:] {
			if later.Done() {
				t.Fatalf("waiter %d served before waiter %d", i+1+j, i)
			}
		}
	}
	if n := p.dialCount(); n != 1 {
		t.Fatalf("%d dials with a limit of 1", n)
	}
}

func TestRouteOpensNoMoreConnectionsThanItsLimit(t *testing.T) {
	p := newPool(t, 3, 8)
	h := p.route("a")
	var ts []*wait.Ticket[Lease]
	for i := 0; i < 10; i++ {
		ts = append(ts, p.ask(h))
	}
	for _, tk := range ts[:3] {
		p.leased(tk)
	}
	if st := p.stats(h); st.Open != 3 || st.Leased != 3 || st.Pending != 7 {
		t.Fatalf("stats %+v", st)
	}
	if n := p.dialCount(); n != 3 {
		t.Fatalf("%d dials for a limit of 3", n)
	}
	if sst := p.supStats(); sst.Total != 3 {
		t.Fatalf("supervisor counts %d connections", sst.Total)
	}
}

func TestRouteDropsAWaiterThatGaveUpAndServesTheNext(t *testing.T) {
	p := newPool(t, 1, 8)
	h := p.route("a")
	held := p.lease(h, 1)[0]
	gone, behind := p.ask(h), p.ask(h)
	gone.Cancel()
	p.sys.Root.Send(h.PID, &LeaseCancelled{Ticket: gone, TimedOut: true})
	if st := p.stats(h); st.Pending != 1 || st.LeaseTimeouts != 1 {
		t.Fatalf("after cancel: %+v", st)
	}
	p.release(h, true, held)
	if l := p.leased(behind); l.ConnID != held.ConnID {
		t.Fatalf("the next waiter got %+v", l)
	}
}

// A lease delivered just as its caller gave up is taken back by the route,
// once: the connection serves the next waiter and is never leased twice.
func TestRouteTakesBackALeaseDeliveredToACallerThatGaveUp(t *testing.T) {
	p := newPool(t, 1, 8)
	h := p.route("a")
	held := p.lease(h, 1)[0]
	late, next := p.ask(h), p.ask(h)
	p.waiting(h, late) // both queued
	p.release(h, true, held)
	got := p.leased(late) // delivered ...
	if !late.Cancel() {   // ... and the caller gives up anyway
		t.Fatal("Cancel did not see the delivery")
	}
	p.sys.Root.Send(h.PID, &LeaseCancelled{Ticket: late})
	if l := p.leased(next); l.ConnID != got.ConnID {
		t.Fatalf("next waiter got %+v, want the returned connection %d", l, got.ConnID)
	}
	// A second cancel message for the same ticket changes nothing.
	p.sys.Root.Send(h.PID, &LeaseCancelled{Ticket: late})
	if st := p.stats(h); st.Leased != 1 || st.Idle != 0 || st.Open != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A ticket cancelled before the route saw its request is never served, and
// the connection meant for it stays with the route.
func TestRouteKeepsTheConnectionOfATicketCancelledInFlight(t *testing.T) {
	p := newPool(t, 1, 8)
	h := p.idleRoute("a", 1)
	tk := &wait.Ticket[Lease]{}
	tk.Cancel()
	p.sys.Root.Send(h.PID, &LeaseRequest{Ticket: tk})
	p.sys.Root.Send(h.PID, &LeaseCancelled{Ticket: tk})
	if st := p.stats(h); st.Idle != 1 || st.Leased != 0 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRouteClosesAConnectionReleasedAsNotReusable(t *testing.T) {
	p := newPool(t, 2, 8)
	h := p.route("a")
	l := p.lease(h, 1)[0]
	p.release(h, false, l)
	st := p.stats(h)
	if st.Open != 0 || st.Closed != 1 || st.ClosedBy[string(route.ReasonNotReusable)] != 1 {
		t.Fatalf("stats %+v", st)
	}
	if l2 := p.lease(h, 1)[0]; l2.Reused || l2.ConnID == l.ConnID {
		t.Fatalf("a discarded connection was leased again: %+v", l2)
	}
}

func TestRouteAnswersEveryWaiterAndClosesItsDoneWhenItStops(t *testing.T) {
	p := newPool(t, 1, 8)
	h := p.route("a")
	p.lease(h, 1)
	var ts []*wait.Ticket[Lease]
	for i := 0; i < 3; i++ {
		ts = append(ts, p.ask(h))
	}
	p.stats(h) // queued before the stop (a system message overtakes user mail)
	p.sys.Root.StopFuture(h.PID).Wait()
	for _, tk := range ts {
		if _, err := result(t, tk); !errors.Is(err, ErrRouteClosed) {
			t.Fatalf("waiter got %v", err)
		}
	}
	select {
	case <-h.Done:
	case <-timeAfter10s():
		t.Fatal("Done not closed after the route stopped")
	}
	if sst := p.supStats(); sst.Total != 0 || len(sst.Routes) != 0 {
		t.Fatalf("supervisor still counts %+v", sst)
	}
}

// A failed dial is reported to the oldest waiter; the others get dials of
// their own (here they fail too), and nothing stays counted.
func TestRouteReportsADialFailureToTheOldestWaiter(t *testing.T) {
	p := newPool(t, 1, 8)
	p.refuse["a"] = errRefused
	h := p.route("a")
	a, b := p.ask(h), p.ask(h)
	for _, tk := range []*wait.Ticket[Lease]{a, b} {
		if _, err := result(t, tk); !errors.Is(err, errRefused) {
			t.Fatalf("waiter got %v, want the dial's error", err)
		}
	}
	st := p.stats(h)
	if st.Open != 0 || st.Pending != 0 || st.DialFailures != 2 || st.Closed != 0 || len(st.ClosedBy) != 0 {
		t.Fatalf("stats after failed dials: %+v", st)
	}
	if sst := p.supStats(); sst.Total != 0 || sst.DialFailures != 2 {
		t.Fatalf("supervisor: %+v", sst)
	}
}

// While the supervisor wants room, a connection freed with no waiter of its
// own is closed instead of kept idle; when room is no longer wanted, freed
// connections are kept again.
func TestRouteClosesFreedConnectionsWhileRoomIsWanted(t *testing.T) {
	p := newPool(t, 2, 8)
	h := p.route("a")
	ls := p.lease(h, 2)
	p.sys.Root.Send(h.PID, &RoomWanted{Wanted: true})
	p.release(h, true, ls[0])
	if st := p.stats(h); st.Open != 1 || st.ClosedBy[string(route.ReasonEvicted)] != 1 {
		t.Fatalf("while wanted: %+v", st)
	}
	p.sys.Root.Send(h.PID, &RoomWanted{Wanted: false})
	p.release(h, true, ls[1])
	if st := p.stats(h); st.Open != 1 || st.Idle != 1 {
		t.Fatalf("after: %+v", st)
	}
}

// Room wanted by the supervisor when it saw nothing idle: a connection that
// went idle since is closed at once for it.
func TestRouteGivesUpAnIdleConnectionWhenRoomIsWanted(t *testing.T) {
	p := newPool(t, 2, 8)
	h := p.idleRoute("a", 1)
	p.sys.Root.Send(h.PID, &RoomWanted{Wanted: true})
	if st := p.stats(h); st.Open != 0 || st.ClosedBy[string(route.ReasonEvicted)] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Above its fleet share (Shed), a route closes a freed connection even when
// its own callers wait: the connections it holds come down to the share.
func TestRouteShedsFreedConnectionsAboveItsShareEvenWithWaiters(t *testing.T) {
	p := newPool(t, 2, 8)
	h := p.route("a")
	ls := p.lease(h, 2)
	waiting := p.ask(h)
	p.sys.Root.Send(h.PID, &RoomWanted{Wanted: true, Shed: true})
	p.release(h, true, ls[0])
	// Above its share the route dials nothing for its waiter: a new
	// connection would be shed as soon as it was dialed.
	if st := p.stats(h); st.ClosedBy[string(route.ReasonFleetShare)] != 1 || st.Open != 1 || st.Pending != 1 || st.Dialing != 0 {
		t.Fatalf("stats %+v", st)
	}
	if n := p.dialCount(); n != 2 {
		t.Fatalf("%d dials above the share, want the first 2 only", n)
	}
	// Back under its share, the waiter is served: by the released
	// connection or by a new dial, whichever the route has first.
	p.sys.Root.Send(h.PID, &RoomWanted{})
	p.release(h, true, ls[1])
	if l := p.leased(waiting); l.ConnID == ls[0].ConnID {
		t.Fatalf("waiter got the shed connection: %+v", l)
	}
	if st := p.stats(h); st.ClosedBy[string(route.ReasonFleetShare)] != 1 || st.Leased != 1 || st.Pending != 0 {
		t.Fatalf("stats after the share came back %+v", st)
	}
}
