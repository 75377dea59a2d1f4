package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/connactor/connactor/route"
)

// A route that stops while its PermitRequest waits in the supervisor's queue
// takes the request with it: the supervisor wants no room for a route that no
// longer exists, so another route's connection, released afterwards, stays
// idle instead of being closed for nobody.
func TestSupervisorDropsTheQueuedPermitsOfAStoppedRoute(t *testing.T) {
	p := newPool(t, 1, 1, withCrashHook())
	a := p.route("a")
	held := p.lease(a, 1)[0] // the one place under MaxConnsTotal 1
	b := p.route("b")
	blocked := p.ask(b) // its permit queues: room is wanted of a
	eventually(t, "b's permit queued", func() bool { return p.supStats().PermitWaiters == 1 })

	p.sys.Root.Send(b.PID, &crashNow{kind: "route"})
	select {
	case <-b.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("route b did not stop")
	}
	if _, err := result(t, blocked); !errors.Is(err, ErrRouteClosed) {
		t.Fatalf("b's waiter got %v, want ErrRouteClosed", err)
	}
	// The round trip orders the supervisor's handling of b's Terminated (and
	// whatever it tells a) before a's release.
	if sst := p.supStats(); sst.PermitWaiters != 0 {
		t.Fatalf("the supervisor still queues %d permits of the stopped route", sst.PermitWaiters)
	}
	p.release(a, true, held)
	st := p.stats(a)
	if st.Idle != 1 || st.ClosedBy[string(route.ReasonEvicted)] != 0 {
		t.Fatalf("a's released connection: idle %d, evicted %d; want it kept idle", st.Idle, st.ClosedBy[string(route.ReasonEvicted)])
	}
	if sst := p.supStats(); sst.Evictions != 0 || sst.Total != 1 {
		t.Fatalf("supervisor: %d evictions, total %d; want 0 and 1", sst.Evictions, sst.Total)
	}
}
