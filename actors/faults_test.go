package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// crashNow makes the actor that receives it panic, through the fault hook.
type crashNow struct{ kind string }

func withCrashHook() poolOpt {
	return withFault(func(kind string, msg any) {
		if c, ok := msg.(*crashNow); ok && c.kind == kind {
			panic("injected " + kind + " failure")
		}
	})
}

// withFault sets the fault hook of the pool's actors.
func withFault(hook FaultHook) poolOpt {
	return func(cfg *SupervisorConfig) { cfg.Route.Fault = hook }
}

// A route actor that panics while callers wait: its queued waiters are
// answered by its Stopping, the requests still in its mailbox and those
// posted after it stopped by the mailbox, all with ErrRouteClosed, and its
// Done closes. The supervisor frees its places, and the next request gets a
// new route actor.
func TestARouteActorThatPanicsClosesItsDoneAndIsReplaced(t *testing.T) {
	p := newPool(t, 1, 2, withCrashHook())
	h := p.route("a")
	held := p.lease(h, 1)[0]
	var queued []*wait.Ticket[Lease]
	for i := 0; i < 20; i++ {
		queued = append(queued, p.ask(h))
	}
	p.stats(h)
	start := time.Now()
	p.sys.Root.Send(h.PID, &crashNow{kind: "route"})
	// The route failed on the crashNow (an inline mailbox ran it on this
	// goroutine) and its mailbox is suspended: these wait in it.
	var inMailbox []*wait.Ticket[Lease]
	for i := 0; i < 5; i++ {
		tk := &wait.Ticket[Lease]{}
		h.post(&LeaseRequest{Ticket: tk})
		inMailbox = append(inMailbox, tk)
	}
	select {
	case <-h.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the route actor panicked")
	}
	t.Logf("Done closed %v after the panic", time.Since(start))
	for i, tk := range append(queued, inMailbox...) {
		if _, err := result(t, tk); !errors.Is(err, ErrRouteClosed) {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	late := &wait.Ticket[Lease]{}
	h.post(&LeaseRequest{Ticket: late})
	if _, err, ok := late.Result(); !ok || !errors.Is(err, ErrRouteClosed) {
		t.Fatalf("a request posted after the route stopped: %v, answered %v", err, ok)
	}
	p.release(h, true, held) // to a dead route: dropped, harmless
	if sst := p.supStats(); sst.Total != 0 || sst.Restarts != 1 || len(sst.Routes) != 0 {
		t.Fatalf("supervisor after the failure: %+v", sst)
	}
	h2 := p.route("a")
	if h2.PID.Id == h.PID.Id {
		t.Fatal("the failed route actor was handed out again")
	}
	p.release(h2, true, p.lease(h2, 1)...) // the limit of 1 holds for the new actor, whose place is free
}

// A route actor that fails while handling a request answers that request too
// (its Stopping does), not only those that waited.
func TestARouteActorThatFailsOnARequestAnswersIt(t *testing.T) {
	p := newPool(t, 1, 2, withFault(func(kind string, msg any) {
		if m, ok := msg.(*LeaseRequest); ok && kind == "route" && m.Fresh {
			panic("injected route failure on a lease")
		}
	}))
	h := p.route("a")
	tk := &wait.Ticket[Lease]{}
	p.sys.Root.Send(h.PID, &LeaseRequest{Ticket: tk, Fresh: true})
	if _, err := result(t, tk); !errors.Is(err, ErrRouteClosed) {
		t.Fatalf("the request the route failed on: %v", err)
	}
	<-h.Done
}

// A supervisor that panics is restarted with every route stopped: every
// route's Done closes and its waiters are answered, every place is free, and
// the route requests that waited in the supervisor's mailbox meanwhile are
// served by the restarted instance.
func TestASupervisorThatPanicsIsRestartedWithEveryRouteClosed(t *testing.T) {
	p := newPool(t, 1, 1, withCrashHook())
	a := p.route("a")
	p.lease(a, 1)
	b := p.route("b")
	blocked := p.ask(b) // waits for room under MaxConnsTotal 1
	p.sys.Root.Send(p.sup, &crashNow{kind: "supervisor"})
	behind := &wait.Ticket[*routeHandle]{} // waits in the mailbox through the restart
	p.supMB.PostUserMessage(&RouteRequest{Key: route.Key{Scheme: "http", Host: "c", Port: "80"}, Ticket: behind})
	for name, done := range map[string]<-chan struct{}{"route a": a.Done, "route b": b.Done} {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not done after the supervisor panicked", name)
		}
	}
	if _, err := result(t, blocked); !errors.Is(err, ErrRouteClosed) {
		t.Fatalf("waiter of a stopped route got %v", err)
	}
	c, err := result(t, behind)
	if err != nil {
		t.Fatalf("a route request posted during the restart: %v", err)
	}
	p.release(c, true, p.lease(c, 1)...) // MaxConnsTotal 1: the old places are free
	if sst := p.supStats(); sst.Total != 1 || sst.Restarts != 0 {
		t.Fatalf("the restarted supervisor: %+v", sst)
	}
}

// A supervisor that fails while handling a route request answers it with
// ErrSupervisorFailed as it restarts; the next request is served.
func TestASupervisorThatFailsOnARouteRequestAnswersIt(t *testing.T) {
	p := newPool(t, 1, 1, withFault(func(kind string, msg any) {
		if m, ok := msg.(*RouteRequest); ok && kind == "supervisor" && m.Key.Host == "boom" {
			panic("injected supervisor failure on a route request")
		}
	}))
	tk := &wait.Ticket[*routeHandle]{}
	p.supMB.PostUserMessage(&RouteRequest{Key: route.Key{Scheme: "http", Host: "boom", Port: "80"}, Ticket: tk})
	if _, err := result(t, tk); !errors.Is(err, ErrSupervisorFailed) {
		t.Fatalf("the request the supervisor failed on: %v", err)
	}
	h := p.route("a")
	p.release(h, true, p.lease(h, 1)...)
}

// A supervisor stopped for good (the client closing, or too many restarts)
// answers what reaches its mailbox afterwards: nobody waits forever.
func TestAStoppedSupervisorAnswersLaterRequests(t *testing.T) {
	p := newPool(t, 1, 1)
	p.route("a")
	if err := p.sys.Root.StopFuture(p.sup).Wait(); err != nil {
		t.Fatal(err)
	}
	tk := &wait.Ticket[*routeHandle]{}
	p.supMB.PostUserMessage(&RouteRequest{Key: route.Key{Scheme: "http", Host: "b", Port: "80"}, Ticket: tk})
	if _, err, ok := tk.Result(); !ok || !errors.Is(err, ErrClosing) {
		t.Fatalf("a route request after the stop: %v, answered %v", err, ok)
	}
	st := &wait.Ticket[StatsResponse]{}
	p.supMB.PostUserMessage(&StatsRequest{Ticket: st})
	if _, err, ok := st.Result(); !ok || !errors.Is(err, ErrClosing) {
		t.Fatalf("a stats request after the stop: %v, answered %v", err, ok)
	}
}
