package actors

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/conc"

	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// fakeRoute stands in for a route actor: the test tells it to ask for permits,
// to hold an idle connection (published as the route would) and to close one.
type fakeRoute struct {
	key    route.Key
	sup    *actor.PID
	pub    *routePublished
	events chan string // "granted", "evict-asked"
	idle   int
	self   *actor.PID
}

type askPermit struct{}
type holdIdle struct {
	since int64
	done  chan struct{}
}
type closeOne struct{}

func (f *fakeRoute) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		f.self = ctx.Self()
	case *askPermit:
		ctx.Send(f.sup, &PermitRequest{From: f.self})
	case *PermitGranted:
		f.events <- f.key.Host + " granted"
	case *RoomWanted:
		f.events <- f.key.Host + fmt.Sprintf(" room-wanted=%v", m.Wanted)
	case *holdIdle:
		f.idle++
		f.pub.Idle.Store(int32(f.idle))
		f.pub.LRUIdleSince.Store(m.since)
		close(m.done)
	case *closeOne:
		ctx.Send(f.sup, &ConnClosed{From: f.self, Reason: route.ReasonNotReusable})
	case *EvictIdleRequest:
		f.events <- f.key.Host + " evict-asked"
		if f.idle > 0 {
			f.idle--
			f.pub.Idle.Store(int32(f.idle))
			if f.idle == 0 {
				f.pub.LRUIdleSince.Store(0)
			}
			ctx.Send(f.sup, &ConnClosed{From: f.self, Reason: route.ReasonEvicted})
		}
		ctx.Send(f.sup, &IdleEvicted{From: f.self, Evicted: true})
	}
}

type supHarness struct {
	t      *testing.T
	sys    *actor.ActorSystem
	sup    *actor.PID
	events chan string
}

func newSupHarness(t *testing.T, maxTotal int, opts ...func(*supHarness, *SupervisorConfig)) *supHarness {
	h := &supHarness{t: t, events: make(chan string, 64)}
	h.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	var wg conc.WaitGroup
	life, cancel := context.WithCancel(context.Background())
	cfg := &SupervisorConfig{
		Route:         &RouteConfig{MaxConnsPerRoute: maxTotal, Life: life, Logger: quiet, Now: time.Now},
		MaxConnsTotal: maxTotal,
		Go:            wg.Go,
		Logger:        quiet,
		NewRoute: func(k route.Key, _ *RouteConfig, sup *actor.PID, parts routeParts) actor.Producer {
			return func() actor.Actor { return &fakeRoute{key: k, sup: sup, pub: parts.pub, events: h.events} }
		},
	}
	for _, o := range opts {
		o(h, cfg)
	}
	h.sup = h.sys.Root.Spawn(actor.PropsFromProducer(NewSupervisor(cfg)))
	t.Cleanup(func() {
		h.sys.Root.StopFuture(h.sup).Wait()
		cancel()
		wg.Wait()
		h.sys.Shutdown()
		// The harness runs in a synctest bubble: protoactor's dead-letter
		// throttle (a goroutine waiting for one tick of a second) must end
		// inside it. The bubble's clock makes this sleep instant.
		time.Sleep(2 * time.Second)
	})
	return h
}

func (h *supHarness) route(name string) *actor.PID {
	tk := &wait.Ticket[*routeHandle]{}
	h.sys.Root.Send(h.sup, &RouteRequest{Key: route.Key{Scheme: "http", Host: name, Port: "80"}, Ticket: tk})
	rh, err := result(h.t, tk)
	if err != nil {
		h.t.Fatal(err)
	}
	return rh.PID
}

// idle makes a fake route publish an idle connection, and waits until it has.
func (h *supHarness) idle(pid *actor.PID, since int64) {
	done := make(chan struct{})
	h.sys.Root.Send(pid, &holdIdle{since: since, done: done})
	<-done
}

func (h *supHarness) expect(want string) {
	h.t.Helper()
	select {
	case got := <-h.events:
		if got != want {
			h.t.Fatalf("event %q, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		h.t.Fatalf("no event, want %q", want)
	}
}

// expectAll waits for the events wanted, in any order.
func (h *supHarness) expectAll(want ...string) {
	h.t.Helper()
	left := map[string]bool{}
	for _, w := range want {
		left[w] = true
	}
	for len(left) > 0 {
		select {
		case got := <-h.events:
			if !left[got] {
				h.t.Fatalf("event %q, want one of %v", got, left)
			}
			delete(left, got)
		case <-time.After(5 * time.Second):
			h.t.Fatalf("no event, want %v", left)
		}
	}
}

// nothing checks that no event is pending once every actor of the bubble
// (testing/synctest) is idle.
func (h *supHarness) nothing() {
	h.t.Helper()
	synctest.Wait()
	select {
	case got := <-h.events:
		h.t.Fatalf("unexpected event %q", got)
	default:
	}
}

func TestSupervisorStartsOneRouteActorPerRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newSupHarness(t, 4)
		a1, a2, b := h.route("a"), h.route("a"), h.route("b")
		if a1.Id != a2.Id || a1.Id == b.Id {
			t.Fatalf("route actors: a=%s a=%s b=%s", a1.Id, a2.Id, b.Id)
		}
	})
}

func TestSupervisorGrantsPermitsUpToTheTotalThenInArrivalOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newSupHarness(t, 2)
		a, b, c, d := h.route("a"), h.route("b"), h.route("c"), h.route("d")
		h.sys.Root.Send(a, &askPermit{})
		h.expect("a granted")
		h.sys.Root.Send(b, &askPermit{})
		h.expect("b granted")
		h.sys.Root.Send(c, &askPermit{})
		// Total reached and nothing idle: c waits, and the routes holding
		// connections are asked to give up the next one they free.
		h.expectAll("a room-wanted=true", "b room-wanted=true")
		h.nothing()
		h.sys.Root.Send(d, &askPermit{})
		h.nothing()
		h.sys.Root.Send(b, &closeOne{})
		// First come, first served: c; it now holds a connection it may free,
		// and b holds none any more.
		h.expectAll("c granted", "c room-wanted=true", "b room-wanted=false")
		h.nothing()
		h.sys.Root.Send(a, &closeOne{})
		h.expectAll("d granted", "a room-wanted=false", "c room-wanted=false")
		h.nothing()
	})
}

func TestSupervisorEvictsTheLeastRecentlyUsedIdleConnectionOfAnyRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newSupHarness(t, 2)
		a, b, c := h.route("a"), h.route("b"), h.route("c")
		h.sys.Root.Send(a, &askPermit{})
		h.expect("a granted")
		h.sys.Root.Send(b, &askPermit{})
		h.expect("b granted")
		h.idle(b, 100) // b's idle connection is older than a's
		h.idle(a, 200)
		h.sys.Root.Send(c, &askPermit{})
		h.expect("b evict-asked")
		h.expect("c granted")
		h.nothing() // a keeps its connection
	})
}

// With the total reached and nothing idle anywhere, the routes holding
// connections are told that room is wanted (once), and told again when the
// waiting route has been served.
func TestSupervisorAsksRoutesForRoomWhenNothingIsIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newSupHarness(t, 1)
		a, b := h.route("a"), h.route("b")
		h.sys.Root.Send(a, &askPermit{})
		h.expect("a granted")
		h.sys.Root.Send(b, &askPermit{})
		h.expect("a room-wanted=true")
		h.nothing()
		h.sys.Root.Send(a, &closeOne{})
		h.expect("b granted")
		h.expect("a room-wanted=false")
		h.nothing()
	})
}

// The supervisor's list of routes stays the set of its byID map, each entry
// at its idx, as routes start and stop in any order.
func TestSupervisorRouteListFollowsStartsAndStops(t *testing.T) {
	s := NewSupervisor(&SupervisorConfig{})().(*Supervisor)
	es := make([]*routeEntry, 6)
	for i := range es {
		es[i] = entryN(i, &routePublished{})
		s.addRoute(es[i])
	}
	check := func(when string) {
		t.Helper()
		if len(s.list) != len(s.byID) || len(s.routes) != len(s.byID) {
			t.Fatalf("%s: %d listed, %d by ID, %d by key", when, len(s.list), len(s.byID), len(s.routes))
		}
		for i, e := range s.list {
			if e.idx != i || s.byID[e.h.PID.Id] != e {
				t.Fatalf("%s: list[%d] is %s at idx %d, by ID %v", when, i, e.h.Key.Host, e.idx, s.byID[e.h.PID.Id] == e)
			}
		}
	}
	check("after 6 starts")
	for _, i := range []int{2, 5, 0, 3} { // a middle one, the last, the first, ...
		s.removeRoute(nil, es[i])
		check(fmt.Sprintf("after route %d stopped", i))
	}
	s.addRoute(es[2])
	check("after a restart")
	left := map[string]bool{}
	for _, e := range s.list {
		left[e.h.Key.Host] = true
	}
	if len(left) != 3 || !left[hostN(1)] || !left[hostN(4)] || !left[hostN(2)] {
		t.Fatalf("routes left: %v, want r1, r2 and r4", left)
	}
}

// The supervisor's list of the routes holding permits stays the set of those
// with held > 0, each at its holdIdx, as permits come and go in any order;
// the search for the least recently used idle connection looks at them only.
func TestSupervisorHoldingListFollowsPermits(t *testing.T) {
	s := NewSupervisor(&SupervisorConfig{})().(*Supervisor)
	es := make([]*routeEntry, 8)
	for i := range es {
		pub := &routePublished{}
		pub.LRUIdleSince.Store(int64(100 - i)) // the later a route, the older its idle connection
		es[i] = entryN(i, pub)
		s.addRoute(es[i])
	}
	set := func(i, held int) {
		es[i].held = held
		s.holdChanged(es[i])
		n := 0
		for _, e := range es {
			if e.held > 0 {
				n++
				if e.holdIdx < 0 || s.holding[e.holdIdx].e != e {
					t.Fatalf("route %s holds %d but is not in holding at %d", e.h.Key.Host, e.held, e.holdIdx)
				}
			} else if e.holdIdx >= 0 {
				t.Fatalf("route %s holds nothing but is in holding at %d", e.h.Key.Host, e.holdIdx)
			}
		}
		if len(s.holding) != n {
			t.Fatalf("%d routes in holding, %d hold permits", len(s.holding), n)
		}
	}
	for _, step := range [][2]int{{1, 1}, {3, 2}, {6, 1}, {1, 2}, {3, 0}, {6, 0}, {0, 1}, {1, 0}, {5, 1}, {0, 0}} {
		set(step[0], step[1])
	}
	if e := s.lruIdleRoute(""); e != es[5] {
		t.Fatalf("least recently used idle route: %v, want %s, the only one holding", e, es[5].h.Key.Host)
	}
	set(7, 1) // holds the oldest idle connection
	if e := s.lruIdleRoute(""); e != es[7] {
		t.Fatalf("least recently used idle route: %v, want %s", e, es[7].h.Key.Host)
	}
}
