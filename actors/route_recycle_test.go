package actors

import (
	"testing"
	"time"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

// settle returns once h has handled everything sent to it so far and what
// that made its connection actors answer: a stats round trip orders the
// messages sent before it, and the RecycleResponses they caused are waited
// for (a connection actor answers in its own time, so a second round trip
// alone does not order them).
func (p *pool) settle(h *routeHandle) routeReport {
	st := p.stats(h)
	eventually(p.tb, "recycled", func() bool {
		st = p.stats(h)
		return st.recycling == 0
	})
	return st
}

// A connection that closes leaves its actor to the route's next dial: the new
// connection has an ID of its own on the same actor, and an event of the old
// connection (its ID) arriving late touches nothing.
func TestRouteRecyclesTheActorOfAClosedConnectionForItsNextDial(t *testing.T) {
	p := newPool(t, 1, 1)
	h := p.route("a")
	old := p.lease(h, 1)[0]
	p.release(h, false, old)
	p.settle(h)
	l := p.lease(h, 1)[0]
	if l.Reused || l.ConnID == old.ConnID {
		t.Fatalf("second lease: conn %d (reused %v) after conn %d; want a new connection", l.ConnID, l.Reused, old.ConnID)
	}
	if l.Conn.Id != old.Conn.Id {
		t.Fatalf("the second connection has actor %s, want the recycled %s", l.Conn.Id, old.Conn.Id)
	}
	if n := p.dialCount(); n != 2 {
		t.Fatalf("%d dials, want 2", n)
	}
	p.release(h, true, l)
	p.sys.Root.Send(h.PID, &conn.IdleBroken{ID: old.ConnID, Err: errRefused}) // the old socket's watcher, late
	st := p.settle(h)
	if st.Idle != 1 || st.Open != 1 || st.Closed != 1 {
		t.Fatalf("after a late event of the old connection: idle %d, open %d, closed %d; want 1, 1, 1", st.Idle, st.Open, st.Closed)
	}
	if sst := p.supStats(); sst.Total != 1 {
		t.Fatalf("supervisor counts %d connections, want 1", sst.Total)
	}
	again := p.lease(h, 1)[0]
	if !again.Reused || again.ConnID != l.ConnID {
		t.Fatalf("lease after the late event: conn %d (reused %v), want the idle conn %d", again.ConnID, again.Reused, l.ConnID)
	}
}

// A route keeps at most maxSpareConns actors without a socket: the actors of
// further closed connections stop, and dials beyond the spares spawn.
func TestRouteKeepsAFewSpareConnectionActorsAndStopsTheRest(t *testing.T) {
	const n = maxSpareConns + 2
	p := newPool(t, n, n)
	h := p.route("a")
	first := p.lease(h, n)
	old := map[string]bool{}
	for _, l := range first {
		old[l.Conn.Id] = true
	}
	p.release(h, false, first...)
	p.settle(h)
	recycled := 0
	for _, l := range p.lease(h, n) {
		if old[l.Conn.Id] {
			recycled++
		}
	}
	if recycled != maxSpareConns {
		t.Fatalf("%d of %d new connections on recycled actors, want %d", recycled, n, maxSpareConns)
	}
	if sst := p.supStats(); sst.Total != n {
		t.Fatalf("supervisor counts %d connections, want %d", sst.Total, n)
	}
}

// A spare connection actor that fails is forgotten: the next dial does not
// wait on it (whether its Terminated arrives before the dial is sent to it
// or after).
func TestRouteForgetsASpareConnectionActorThatFailed(t *testing.T) {
	p := newPool(t, 1, 1, crashConns)
	h := p.route("a")
	old := p.lease(h, 1)[0]
	p.release(h, false, old)
	p.settle(h)
	p.sys.Root.Send(old.Conn, &crashNow{kind: "conn"})
	l := p.lease(h, 1)[0]
	if l.Conn.Id == old.Conn.Id {
		t.Fatal("the failed actor was given a connection")
	}
	p.release(h, true, l)
	if st := p.settle(h); st.Idle != 1 || st.Open != 1 {
		t.Fatalf("idle %d, open %d; want 1, 1", st.Idle, st.Open)
	}
	if sst := p.supStats(); sst.Total != 1 {
		t.Fatalf("supervisor counts %d connections, want 1", sst.Total)
	}
}

// crashConns makes connection actors panic on crashNow{kind: "conn"}.
func crashConns(cfg *SupervisorConfig) {
	cfg.Route.Conn.Fault = func(kind string, msg any) {
		if c, ok := msg.(*crashNow); ok && c.kind == kind {
			panic("injected " + kind + " failure")
		}
	}
}

// A connection actor that fails while its connection is leased is closed
// (route.ReasonError) and never taken for a spare: the route's next closed
// connection is recycled as usual.
func TestRouteNeverRecyclesAConnectionActorThatFailed(t *testing.T) {
	p := newPool(t, 1, 1, crashConns)
	h := p.route("a")
	failed := p.lease(h, 1)[0]
	p.sys.Root.Send(failed.Conn, &crashNow{kind: "conn"})
	eventually(t, "the failed connection closed", func() bool { return p.stats(h).ClosedBy[string(route.ReasonError)] == 1 })
	l := p.lease(h, 1)[0]
	if l.Conn.Id == failed.Conn.Id {
		t.Fatal("the failed actor was given a connection")
	}
	p.release(h, false, l)
	p.settle(h)
	if next := p.lease(h, 1)[0]; next.Conn.Id != l.Conn.Id {
		t.Fatalf("the next connection has actor %s, want the recycled %s", next.Conn.Id, l.Conn.Id)
	}
}

// A route that has had no connection for MaxIdleTime stops its spare actors
// (the fixture's MaxIdleTime is a minute), and with them itself (it reclaims
// itself unused): a quiet route keeps nothing, and the route started for its
// next request spawns an actor again.
func TestRouteStopsItsSpareActorsOnceQuietForMaxIdleTime(t *testing.T) {
	p := newPool(t, 2, 2)
	h := p.route("a")
	first := p.lease(h, 2)
	old := map[string]bool{first[0].Conn.Id: true, first[1].Conn.Id: true}
	p.release(h, false, first...)
	if st := p.settle(h); st.spare != 2 || st.Open != 0 {
		t.Fatalf("after both connections closed: %d spares, %d open; want 2 and 0", st.spare, st.Open)
	}
	p.sys.Root.Send(h.PID, &ExpiryTicked{Now: time.Now().Add(30 * time.Second)})
	if st := p.settle(h); st.spare != 2 {
		t.Fatalf("%d spares half a MaxIdleTime after the last close, want 2 kept", st.spare)
	}
	p.sys.Root.Send(h.PID, &ExpiryTicked{Now: time.Now().Add(2 * time.Minute)})
	select {
	case <-h.Done:
	case <-timeAfter10s():
		t.Fatal("the route did not stop after MaxIdleTime without a connection")
	}
	for id := range old {
		if _, alive := p.sys.ProcessRegistry.GetLocal(id); alive {
			t.Fatalf("spare %s outlived its route", id)
		}
	}
	h = p.route("a")
	l := p.lease(h, 1)[0]
	if old[l.Conn.Id] {
		t.Fatalf("the next connection runs on stopped spare %s", l.Conn.Id)
	}
	p.release(h, true, l)
}

// Routes used once each, each losing its only connection to make room for
// the next route (MaxConnsTotal 4), keep no spare actor: a host called once
// gets no dial again. A route that has opened a second connection, and
// loses it to eviction, keeps its actor for the next dial.
func TestARouteEvictedAfterItsOnlyConnectionKeepsNoSpare(t *testing.T) {
	const routes, maxTotal = 20, 4
	p := newPool(t, 1, maxTotal)
	// lease leases on h once and releases the connection, reusable or not.
	lease := func(h *routeHandle, reusable bool) { p.release(h, reusable, p.lease(h, 1)...) }
	next := routes // the next new route's host
	hs := make([]*routeHandle, routes)
	for i := range hs {
		hs[i] = p.route(hostN(i))
		lease(hs[i], true)
	}
	if st := p.supStats(); st.Total != maxTotal || st.Evictions != routes-maxTotal {
		t.Fatalf("%d connections open, %d evicted; want %d and %d", st.Total, st.Evictions, maxTotal, routes-maxTotal)
	}
	evicted := 0
	for _, h := range hs {
		st := p.settle(h)
		if st.Open != 0 {
			continue // one of the maxTotal still open (which ones depends on when each release was heard)
		}
		evicted++
		if st.Opened != 1 || st.spare != 0 {
			t.Fatalf("route %s, evicted after its only connection: %d opened, %d spares; want 1, 0", h.Key, st.Opened, st.spare)
		}
	}
	if evicted != routes-maxTotal {
		t.Fatalf("%d routes without a connection; want %d", evicted, routes-maxTotal)
	}
	// A route whose first connection is closed unreusable keeps its actor
	// (not evicted), dials its second on it, and keeps it again when that
	// one is evicted (new routes taking places until it is).
	h := p.route("churning")
	lease(h, false)
	lease(h, true)
	st := p.settle(h)
	for i := 0; st.Open != 0; i++ {
		if i == routes {
			t.Fatalf("route %s still holds its connection after %d new routes took places", h.Key, i)
		}
		lease(p.route(hostN(next)), true)
		next++
		st = p.settle(h)
	}
	if st.Opened != 2 || st.spare != 1 {
		t.Fatalf("route %s, evicted after its second connection: %d opened, %d spares; want 2, 1", h.Key, st.Opened, st.spare)
	}
}
