package actors

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/wait"
)

// fleetHarness is a supervisor with fake routes and a fake keeper that
// records what the supervisor tells it; the test plays the keeper's part by
// sending ShareChanged.
type fleetHarness struct {
	*supHarness
	usage chan UsageReported
	asked chan struct{} // a SharesRequest arrived
}

// newFleetHarness starts the supervisor with a fleet budget; interval is its
// FleetInterval (an hour: only messages make it report).
func newFleetHarness(t *testing.T, maxTotal int, interval time.Duration) *fleetHarness {
	f := &fleetHarness{usage: make(chan UsageReported, 64), asked: make(chan struct{}, 4)}
	f.supHarness = newSupHarness(t, maxTotal, func(h *supHarness, cfg *SupervisorConfig) {
		cfg.Fleet = h.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			switch m := ctx.Message().(type) {
			case *UsageReported:
				f.usage <- *m
			case *SharesRequest:
				f.asked <- struct{}{}
			}
		}))
		cfg.FleetInterval = interval
	})
	select {
	case <-f.asked:
	case <-time.After(5 * time.Second):
		t.Fatal("the supervisor did not ask the keeper for the shares when it started")
	}
	return f
}

// published returns what the supervisor publishes of route name's fleet
// share, from the handles its StatsResponse lists.
func (f *fleetHarness) published(name string) *fleetPublished {
	tk := &wait.Ticket[StatsResponse]{}
	f.sys.Root.Send(f.sup, &StatsRequest{Ticket: tk})
	st, err := result(f.t, tk)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, h := range st.Routes {
		if h.Key.Host == name {
			return h.Fleet
		}
	}
	f.t.Fatalf("no route %s", name)
	return nil
}

func (f *fleetHarness) share(name string, share int) {
	f.sys.Root.Send(f.sup, &ShareChanged{Route: "http://" + name + ":80", Share: share, Budget: 12})
}

// expectUsage waits for the next usage report; the deadline guards against a
// hung test.
func (f *fleetHarness) expectUsage(name string, held, idle, waiting int) {
	f.t.Helper()
	want := UsageReported{Route: "http://" + name + ":80", Held: held, Idle: idle, Waiting: waiting}
	select {
	case got := <-f.usage:
		if got != want {
			f.t.Fatalf("usage %+v, want %+v", got, want)
		}
	case <-time.After(5 * time.Second):
		f.t.Fatalf("no usage report, want %+v", want)
	}
}

func (f *fleetHarness) noUsage() {
	f.t.Helper()
	synctest.Wait()
	select {
	case got := <-f.usage:
		f.t.Fatalf("unexpected usage report %+v", got)
	default:
	}
}

func TestSupervisorGrantsARoutePermitsOnlyUpToItsFleetShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleetHarness(t, 8, time.Hour)
		a := f.route("a")
		f.sys.Root.Send(a, &askPermit{})
		f.expectUsage("a", 0, 0, 1) // every route starts at share 0: it waits
		f.sys.Root.Send(a, &askPermit{})
		f.expectUsage("a", 0, 0, 2)
		f.nothing()
		pub := f.published("a")
		if got := pub.Share.Load(); got != 0 {
			t.Errorf("published share %d before the keeper told one, want 0", got)
		}

		f.share("a", 1)
		f.expect("a granted")
		f.expectUsage("a", 1, 0, 1)
		f.nothing()
		if got := pub.Share.Load(); got != 1 {
			t.Errorf("published share %d, want 1", got)
		}

		f.share("a", 3)
		f.expect("a granted")
		f.expectUsage("a", 2, 0, 0)
		if got, budget := pub.Share.Load(), pub.Budget.Load(); got != 3 || budget != 12 {
			t.Errorf("published share %d of %d, want 3 of 12", got, budget)
		}
		f.sys.Root.Send(a, &closeOne{})
		f.expectUsage("a", 1, 0, 0)
		f.noUsage()
	})
}

// A route at its share lets the routes behind it pass, and no room is made
// for it under MaxConnsTotal: it could not use the room.
func TestSupervisorLetsOtherRoutesPassARouteAtItsShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleetHarness(t, 2, time.Hour)
		f.share("b", 5) // before the route exists: it starts with it
		a, b := f.route("a"), f.route("b")
		f.share("a", 1)
		f.sys.Root.Send(a, &askPermit{})
		f.expect("a granted")
		f.sys.Root.Send(a, &askPermit{}) // at its share
		f.sys.Root.Send(b, &askPermit{})
		f.expect("b granted")
		f.nothing() // the total is reached, but only a, at its share, waits

		f.sys.Root.Send(b, &askPermit{})
		f.expectAll("a room-wanted=true", "b room-wanted=true")
		f.sys.Root.Send(a, &closeOne{})
		// a is under its share again and asked before b: first come, first
		// served. b still waits, and room is still wanted.
		f.expect("a granted")
		f.nothing()
	})
}

func TestSupervisorShedsIdleConnectionsAboveAShrunkShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleetHarness(t, 8, time.Hour)
		a := f.route("a")
		f.share("a", 3)
		for range 3 {
			f.sys.Root.Send(a, &askPermit{})
			f.expect("a granted")
		}
		f.idle(a, 100)
		f.idle(a, 200) // two idle, one busy
		f.share("a", 1)
		// Idle connections go one at a time; the busy one is not cut, but the
		// route is told to close it when its request frees it.
		f.expect("a room-wanted=true")
		f.expect("a evict-asked")
		f.expect("a evict-asked")
		f.expect("a room-wanted=false")
		f.nothing()
		f.sys.Root.Send(a, &askPermit{}) // at its share again
		f.nothing()
	})
}

// Idle and waiting counts that change without a message to the supervisor
// (a route that serves from its idle list sends none) are reported from the
// supervisor's fleet tick, once per change.
func TestSupervisorReportsPublishedChangesOnItsFleetTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleetHarness(t, 8, 5*time.Millisecond)
		a := f.route("a")
		f.share("a", 2)
		f.sys.Root.Send(a, &askPermit{})
		f.expect("a granted")
		for {
			u := <-f.usage
			if u.Held == 1 && u.Waiting == 0 {
				break // the permit's report; an earlier tick may have seen it waiting
			}
		}
		f.idle(a, 100)
		f.expectUsage("a", 1, 1, 0)
		f.noUsage() // ticks go on; nothing changed

		// A route that stops holds nothing: the keeper hears so.
		f.sys.Root.Poison(a)
		f.expectUsage("a", 0, 0, 0)
		f.noUsage()
	})
}

// A route whose callers gave up while it waited for its fleet share wants
// nothing any more: the permits it had asked for leave the supervisor's
// queue, and the keeper hears that nobody waits, so that it gives the share
// it asked for back to the other nodes instead of asking again for ever.
func TestRouteWhoseCallersLeftWithdrawsItsPermitsAndWaitsForNothing(t *testing.T) {
	usage := make(chan UsageReported, 256)
	p := newPool(t, 4, 8, func(cfg *SupervisorConfig) {
		cfg.FleetInterval = 5 * time.Millisecond
		cfg.Fleet = actor.NewPID("nonhost", "fleet-test-keeper") // spawned below, once the system exists
	})
	if _, err := p.sys.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*UsageReported); ok {
			usage <- *m
		}
	}), "fleet-test-keeper"); err != nil {
		t.Fatal(err)
	}
	h := p.route("a")
	ts := []*wait.Ticket[Lease]{p.ask(h), p.ask(h)}
	waitUsage := func(what string, cond func(UsageReported) bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case u := <-usage:
				if u.Route == "http://a:80" && cond(u) {
					return
				}
			case <-deadline:
				t.Fatalf("the keeper never heard %s", what)
			}
		}
	}
	// Share 0: both wait for the fleet, with their permits queued.
	waitUsage("two callers waiting", func(u UsageReported) bool { return u.Waiting == 2 })
	for _, tk := range ts {
		tk.Cancel()
		p.sys.Root.Send(h.PID, &LeaseCancelled{Ticket: tk})
	}
	waitUsage("that nobody waits", func(u UsageReported) bool { return u.Waiting == 0 && u.Held == 0 })
	eventually(t, "the permits out of the queue", func() bool { return p.supStats().PermitWaiters == 0 })
}
