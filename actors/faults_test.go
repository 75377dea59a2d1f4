package actors

import (
	"errors"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/wait"
)

// crashNow makes the actor that receives it panic, through the fault hook.
type crashNow struct{ kind string }

func withCrashHook() poolOpt {
	return func(cfg *SupervisorConfig) {
		cfg.Route.Fault = func(kind string, msg any) {
			if c, ok := msg.(*crashNow); ok && c.kind == kind {
				panic("injected " + kind + " failure")
			}
		}
	}
}

// A route actor that panics while callers wait: its queued waiters are
// answered, requests still in its mailbox are not (protoactor drops them),
// and its Done closes so that those callers wake at once. The supervisor
// frees its places, and the next request gets a new route actor.
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
	select {
	case <-h.Done:
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after the route actor panicked")
	}
	t.Logf("Done closed %v after the panic", time.Since(start))
	for i, tk := range queued {
		if _, err := result(t, tk); !errors.Is(err, ErrRouteClosed) {
			t.Fatalf("queued waiter %d: %v", i, err)
		}
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

// A supervisor that panics is restarted with every route stopped: the old
// incarnation and every route's Done close, every place is free, and new
// route requests are served by the new incarnation.
func TestASupervisorThatPanicsIsRestartedWithEveryRouteClosed(t *testing.T) {
	p := newPool(t, 1, 1, withCrashHook())
	a := p.route("a")
	p.lease(a, 1)
	b := p.route("b")
	blocked := p.ask(b) // waits for room under MaxConnsTotal 1
	inc := p.inc.Load()
	p.sys.Root.Send(p.sup, &crashNow{kind: "supervisor"})
	for name, done := range map[string]<-chan struct{}{"incarnation": inc.Done(), "route a": a.Done, "route b": b.Done} {
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s not done after the supervisor panicked", name)
		}
	}
	if _, err := result(t, blocked); !errors.Is(err, ErrRouteClosed) {
		t.Fatalf("waiter of a stopped route got %v", err)
	}
	// The old incarnation ended for a restart: it names its successor, which
	// is published by the time its channel closes.
	next, restarting := inc.Successor()
	if !restarting {
		t.Fatal("the incarnation of a restarted supervisor has no successor")
	}
	select {
	case <-next:
	case <-time.After(10 * time.Second):
		t.Fatal("no successor 10s after the supervisor panicked")
	}
	now := p.inc.Load()
	if now == inc {
		t.Fatal("the successor was announced before it was published")
	}
	if _, ok := now.Successor(); ok {
		t.Fatal("a live incarnation reports a successor")
	}
	c := p.route("c")
	p.release(c, true, p.lease(c, 1)...) // MaxConnsTotal 1: the old places are free
	if sst := p.supStats(); sst.Total != 1 {
		t.Fatalf("new supervisor counts %d connections", sst.Total)
	}
}

// A supervisor stopped for good (the client closing, or too many restarts)
// leaves an incarnation without a successor: nobody waits for one.
func TestAStoppedSupervisorsIncarnationHasNoSuccessor(t *testing.T) {
	p := newPool(t, 1, 1)
	p.route("a")
	inc := p.inc.Load()
	if err := p.sys.Root.StopFuture(p.sup).Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-inc.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("incarnation not done after the supervisor stopped")
	}
	if _, ok := inc.Successor(); ok {
		t.Fatal("a stopped supervisor's incarnation reports a successor")
	}
}
