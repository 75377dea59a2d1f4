package actors

import (
	"testing"

	"go.uber.org/goleak"
)

// A route that stops (the client closes) closes its HTTP/2 connections, a
// leased one and an idle one: their engines' read loops and the server's
// side end, and nothing of theirs is left running.
func TestRouteStoppingEndsItsHTTP2ConnectionsReadLoops(t *testing.T) {
	before := goleak.IgnoreCurrent()
	s, opt := withH2C(t, 1)
	s.openGate()
	p := newPool(t, 2, 10, opt)
	h := p.route("a")
	ls := p.lease(h, 2) // two connections, a stream each
	if ls[0].ConnID == ls[1].ConnID || ls[0].H2 == nil || ls[1].H2 == nil {
		t.Fatalf("leases on connections %d and %d, want two HTTP/2 connections", ls[0].ConnID, ls[1].ConnID)
	}
	p.release(h, true, ls[1]) // one idle, one leased
	eventually(t, "an idle connection", func() bool { return h.Pub.Idle.Load() == 1 })

	if err := p.sys.Root.StopFuture(h.PID).Wait(); err != nil {
		t.Fatal(err)
	}
	// The dial workers belong to the pool (conn.Options), which lives on.
	if err := goleak.Find(before,
		goleak.IgnoreTopFunction("github.com/connactor/connactor/conn.(*dialWorkers).serve"),
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")); err != nil {
		t.Fatalf("after the route stopped: %v", err)
	}
	for i, l := range ls {
		if st := l.H2.Streams(); !st.Closed {
			t.Errorf("connection %d not closed: %+v", i, st)
		}
	}
}
