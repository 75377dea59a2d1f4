package actors

import (
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/testkit/footprint"
)

// Routes used once each, then left alone (a crawler's), on the bubble's fake
// clock (testing/synctest): right after, each holds an actor, an idle
// connection (its actor and its idle watch) and the supervisor's records;
// after MaxIdleTime and one expiry tick their connections have expired and
// the routes have reclaimed themselves, and the heap, the goroutines and the
// actors are back within 10% of what they were before the routes. The
// baseline is taken with the actor system's registry and the runtime's
// goroutine records warmed: what a process pays once (protoactor's registry
// keeps its shards, the runtime the records of its most goroutines at once)
// is not what routes leave behind.
func TestRoutesUsedOnceAreReclaimedAfterMaxIdleTime(t *testing.T) {
	const n = 2000
	synctest.Test(t, func(t *testing.T) {
		settleDeadLetters(t)
		const tick = time.Second
		var timersMade atomic.Int64 // the long-wait timers made: the pool found none to lend
		p := newPool(t, 1, 1<<20, func(cfg *SupervisorConfig) {
			cfg.ExpiryInterval = tick
			cfg.Route.waitTimers = &sync.Pool{New: func() any { timersMade.Add(1); return nil }}
		})
		p.forget = true
		wave := func(first int) {
			for i := range n {
				h := p.route(hostN(first + i))
				p.release(h, true, p.lease(h, 1)...)
			}
			synctest.Wait()
		}
		footprint.Warm(p.sys, 2*n)
		base := footprint.Take(p.sys)

		wave(0)
		used := footprint.Take(p.sys)
		if st := p.supStats(); len(st.Routes) != n || st.Total != n {
			t.Fatalf("after the second wave: %d routes, %d connections; want %d of each", len(st.Routes), st.Total, n)
		}
		time.Sleep(time.Minute + tick) // MaxIdleTime, and the tick after it
		synctest.Wait()
		after := footprint.Take(p.sys)
		t.Logf("%d routes used once:\n\tbefore: %v\n\tright after: %v\n\tafter MaxIdleTime and a tick: %v",
			n, base, used, after)
		st := p.supStats()
		if len(st.Routes) != 0 || st.Total != 0 || st.Reclaimed != n || st.Restarts != 0 {
			t.Fatalf("%d routes left, %d connections, %d reclaimed, %d failed; want 0, 0, %d, 0",
				len(st.Routes), st.Total, st.Reclaimed, st.Restarts, n)
		}
		if used.Actors != base.Actors+2*n {
			t.Fatalf("right after: %v; want %d more actors than before (%v): a route's and its connection's", used, 2*n, base)
		}
		// Each route's first caller waited for its dial, with a long-wait
		// timer; the routes, one at a time, lent and gave back the same few
		// (more when a collection emptied the pool, and, under the race
		// detector, for the quarter of what is given back that sync.Pool
		// drops).
		most := n / 100
		if raceEnabled {
			most = n / 3
		}
		if made := timersMade.Load(); made > int64(most) {
			t.Fatalf("%d long-wait timers made for %d routes, one caller waiting at a time; want at most %d", made, n, most)
		}
		if !after.Within(base, 0.1) {
			t.Fatalf("after MaxIdleTime and a tick: %v; want the actors and goroutines of before, and the heap within 10%% (%v)",
				after, base)
		}
	})
}

// The supervisor's maps of routes give their memory back once most routes
// are gone (a Go map keeps the memory of its largest size): after 20,000
// routes, 10 left hold a tenth of what the 20,000 added at most.
func TestTheSupervisorsMapsShrinkOnceMostRoutesAreGone(t *testing.T) {
	const n, left = 20_000, 10
	heap0, _ := liveHeap()
	s := NewSupervisor(&SupervisorConfig{Route: &RouteConfig{}})().(*Supervisor)
	s.resolvers, s.resolverHost = map[string]*hostResolver{}, map[string]string{}
	es := make([]*routeEntry, n)
	for i := range es {
		es[i] = entryN(i, &routePublished{})
		es[i].host = es[i].h.Key.Addr()
		s.addRoute(es[i])
		s.hostHeld[es[i].host] = 1
		s.resolvers[es[i].h.Key.Host] = &hostResolver{pid: es[i].h.PID, routes: 1} // a resolver's PID, for its key
		s.resolverHost[es[i].h.PID.Id] = es[i].h.Key.Host
		es[i].held = 1 // it holds a connection
		s.holdChanged(es[i])
	}
	heap1, _ := liveHeap()
	for i, e := range es[left:] {
		delete(s.hostHeld, e.host) // as the route's Terminated does, with its endpoints unwatched
		delete(s.resolvers, e.h.Key.Host)
		delete(s.resolverHost, e.h.PID.Id)
		e.held = 0 // its connection closed
		s.holdChanged(e)
		s.removeRoute(nil, e)
		es[left+i] = nil
	}
	heap2, _ := liveHeap()
	if len(s.routes) != left || len(s.byID) != left || len(s.list) != left || len(s.hostHeld) != left ||
		len(s.resolvers) != left || len(s.resolverHost) != left || len(s.holding) != left {
		t.Fatalf("%d routes, %d by ID, %d listed, %d hosts, %d resolvers (%d by ID), %d holding; want %d of each",
			len(s.routes), len(s.byID), len(s.list), len(s.hostHeld), len(s.resolvers), len(s.resolverHost), len(s.holding), left)
	}
	if cap(s.holding) > cap(s.list) {
		t.Fatalf("the list of routes holding connections keeps room for %d, that of routes for %d", cap(s.holding), cap(s.list))
	}
	for i, h := range s.holding {
		if h.e.holdIdx != i {
			t.Fatalf("holding entry %d (%s) lost its place after the rebuild", i, h.e.h.Key)
		}
	}
	for i, e := range s.list {
		if e.idx != i || s.byID[e.h.PID.Id] != e || s.routes[e.h.Key] != e {
			t.Fatalf("entry %d (%s) lost after the maps were rebuilt", i, e.h.Key)
		}
	}
	added, kept := int64(heap1)-int64(heap0), int64(heap2)-int64(heap0)
	t.Logf("%d routes added %d KB; %d left keep %d KB", n, added>>10, left, kept>>10)
	if kept > added/10 {
		t.Fatalf("%d routes left keep %d KB of the %d KB that %d added", left, kept>>10, added>>10, n)
	}
	runtime.KeepAlive(es)
}

// protoactor's set of an actor's children keeps the room of the most
// children the actor had (a Go map never shrinks): compactChildren rebuilds
// it at the size of what it holds. Checked on the pinned protoactor's layout
// (childSet finds the set), with the heap it gives back, and with the set
// still right afterwards: the children left are found, stop and leave it,
// and a new child joins it.
func TestCompactChildren(t *testing.T) {
	const n, left = 20_000, 10
	type spawn struct{ n int }
	type stopAllBut struct{ left int }
	type compact struct{}
	type check struct{}
	type result struct {
		found            bool
		setLen, children int
		has              bool // every child in Children() is in the set
	}
	results := make(chan result, 1)
	stopped := make(chan struct{}, n)
	var kids []*actor.PID
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	defer sys.Shutdown()
	parent := sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case spawn:
			for range m.n {
				kids = append(kids, ctx.Spawn(actor.PropsFromFunc(func(actor.Context) {})))
			}
		case stopAllBut:
			for _, k := range kids[m.left:] {
				ctx.Stop(k)
			}
			kids = kids[:m.left]
		case *actor.Terminated:
			stopped <- struct{}{}
		case compact:
			compactChildren(ctx)
		case check:
			set := childSet(ctx)
			r := result{found: set != nil, children: len(ctx.Children())}
			if set != nil {
				r.setLen, r.has = set.Len(), true
				for _, k := range ctx.Children() {
					r.has = r.has && set.Contains(k)
				}
			}
			results <- r
		}
	}))
	ask := func(want result, when string) {
		t.Helper()
		sys.Root.Send(parent, check{})
		if r := <-results; r != want {
			t.Fatalf("%s: %+v; want %+v", when, r, want)
		}
	}
	sys.Root.Send(parent, spawn{n})
	ask(result{found: true, setLen: n, children: n, has: true}, "after the spawns")
	sys.Root.Send(parent, stopAllBut{left})
	for range n - left {
		<-stopped
	}
	ask(result{found: true, setLen: left, children: left, has: true}, "after the stops")
	before, _ := liveHeap()
	sys.Root.Send(parent, compact{})
	ask(result{found: true, setLen: left, children: left, has: true}, "after the rebuild")
	after, _ := liveHeap()
	// The set's map held room for 20,000 entries of a PID's address and ID
	// (two strings) and an index: over a megabyte.
	if before < after || before-after < 1<<20 {
		t.Fatalf("the rebuild gave back %d bytes of the heap (%d before, %d after); want more than 1 MiB", int64(before)-int64(after), before, after)
	}
	sys.Root.Send(parent, spawn{1})
	ask(result{found: true, setLen: left + 1, children: left + 1, has: true}, "after a new child")
	sys.Root.Send(parent, stopAllBut{0})
	for range left + 1 {
		<-stopped
	}
	ask(result{found: true, setLen: 0, children: 0, has: true}, "after every child stopped")
}
