package actors

import (
	"testing"
	"weak"

	"github.com/connactor/connactor/internal/testkit/footprint"
	"github.com/connactor/connactor/internal/wait"
)

// A route keeps none of the stats requests it answered, also those that
// queued in its mailbox while it was busy, more of them than its queue's
// inline places (Stats polled while the route works: each call posts one).
// Pool.Stats allocates its tickets in one array, and one request kept by a
// route kept that array, for as long as the route lived; a stopped route,
// kept by a PID that another mailbox's inline places held, kept it after
// the route was gone.
func TestARouteKeepsNoStatsRequestItAnswered(t *testing.T) {
	busy := &RouteStatsRequest{Ticket: &wait.Ticket[routeReport]{}} // the route message the hook holds
	gate, holding := make(chan struct{}), make(chan struct{})
	p := newPool(t, 1, 1, withFault(func(kind string, msg any) {
		if kind == "route" && msg == busy {
			close(holding)
			<-gate
		}
	}))
	h := p.route(hostN(1))
	held := make(chan struct{})
	go func() { // owned by the test: ends when gate closes
		defer close(held)
		h.post(busy) // runs the route on this goroutine, held by the hook
	}()
	<-holding
	const queued = 5 // more than the mailbox queue's two inline places
	tickets, answered := askStatsWeakly(h, queued)
	close(gate)
	<-held
	for _, a := range answered {
		select {
		case <-a:
		case <-timeAfter10s():
			t.Fatal("a stats request was not answered in 10s")
		}
	}
	kept := footprint.Kept(tickets)
	if kept > 0 {
		t.Fatalf("%d of the %d answered stats requests' tickets are still reachable: the route keeps them", kept, queued)
	}
	p.stats(h) // the route lives on
}

// askStatsWeakly posts n stats requests to h's mailbox, as Pool.Stats does,
// and returns weak pointers to their tickets and channels closed once they
// are answered (in a function of its own: no pointer to the tickets stays on
// the test's stack).
func askStatsWeakly(h *routeHandle, n int) ([]weak.Pointer[wait.Ticket[routeReport]], []<-chan struct{}) {
	weaks := make([]weak.Pointer[wait.Ticket[routeReport]], n)
	answered := make([]<-chan struct{}, n)
	for i := range weaks {
		t := &wait.Ticket[routeReport]{}
		weaks[i], answered[i] = weak.Make(t), t.Ready()
		h.post(&RouteStatsRequest{Ticket: t})
	}
	return weaks, answered
}
