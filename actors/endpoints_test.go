package actors

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/conc"

	"github.com/connactor/connactor/internal/testkit/logrec"
	"github.com/connactor/connactor/internal/testkit/loopbacks"
	"github.com/connactor/connactor/internal/wait"
	"github.com/connactor/connactor/route"
)

// The resolver actor on the bubble's fake clock (testing/synctest): a watcher
// actor stands in for a route and hands each EndpointsResolved to the test.

type resolverHarness struct {
	t       *testing.T
	sys     *actor.ActorSystem
	res     *loopbacks.Resolver
	pid     *actor.PID
	answers chan *EndpointsResolved
	logs    *logrec.Recorder
}

// watcher forwards what a resolver tells it.
type watcher struct{ out chan *EndpointsResolved }

func (w *watcher) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*EndpointsResolved); ok {
		w.out <- m
	}
}

const (
	msgFailing   = "connactor: resolving a host fails; its routes keep its last addresses"
	msgRecovered = "connactor: resolving a host succeeds again"
)

// newResolverHarness starts svc.test's resolver (refresh as given) with a
// watcher; the test sets res before the first lookup it waits for.
func newResolverHarness(t *testing.T, refresh time.Duration) *resolverHarness {
	h := &resolverHarness{t: t, res: &loopbacks.Resolver{}, answers: make(chan *EndpointsResolved, 64),
		logs: &logrec.Recorder{}}
	h.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	life, cancel := context.WithCancel(context.Background())
	var wg conc.WaitGroup
	cfg := &EndpointsConfig{Resolver: h.res, Refresh: refresh, Timeout: 10 * time.Second, Life: life, Go: wg.Go,
		Logger: slog.New(h.logs)}
	h.res.Set(loopbacks.Addr(2))
	w := h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &watcher{out: h.answers} }))
	h.pid = h.sys.Root.Spawn(actor.PropsFromProducer(newResolver("svc.test", cfg)))
	h.sys.Root.Send(h.pid, &EndpointsWatched{Route: w})
	t.Cleanup(func() {
		h.sys.Root.StopFuture(h.pid).Wait()
		cancel()
		wg.Wait()
		h.sys.Shutdown()
		time.Sleep(2 * time.Second) // protoactor's dead-letter throttle ends within the bubble
	})
	return h
}

// next waits for the resolver's next answer and returns it with the time it
// took on the bubble's clock.
func (h *resolverHarness) next() (*EndpointsResolved, time.Duration) {
	h.t.Helper()
	start := time.Now()
	select {
	case m := <-h.answers:
		return m, time.Since(start)
	case <-time.After(time.Hour):
		h.t.Fatal("no answer within an hour")
		return nil, 0
	}
}

// A resolver answers its routes after its first lookup, then looks again
// every Refresh, ±10%, and not at the same pace each time.
func TestAResolverLooksItsHostUpAgainEveryRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newResolverHarness(t, 30*time.Second)
		if m, d := h.next(); d != 0 || len(m.Addrs) != 1 || m.Addrs[0] != loopbacks.Addr(2) || m.Err != nil || m.At.IsZero() {
			t.Fatalf("first answer %+v after %v, want 127.0.0.2 at once", m, d)
		}
		seen := map[time.Duration]bool{}
		for range 10 {
			_, d := h.next()
			if d < 27*time.Second || d > 33*time.Second {
				t.Fatalf("next lookup after %v, want 30s ±10%%", d)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Fatalf("every lookup after the same %v: no jitter", seen)
		}
		if n := h.res.Lookups(); n != 11 {
			t.Fatalf("%d lookups, want 11", n)
		}
	})
}

// Dials that fail ask for a lookup (ResolveSoon): one goes a second after the
// last began, however many asked meanwhile; later, one goes at once.
func TestFailedDialsAskForALookupAtMostOnceASecond(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newResolverHarness(t, time.Minute)
		h.next()
		time.Sleep(100 * time.Millisecond)
		for range 5 {
			h.sys.Root.Send(h.pid, resolveSoon)
		}
		if _, d := h.next(); d != 900*time.Millisecond {
			t.Fatalf("the asked lookup came %v after the asks, want 900ms (a second after the last began)", d)
		}
		if n := h.res.Lookups(); n != 2 {
			t.Fatalf("%d lookups, want 2", n)
		}
		time.Sleep(5 * time.Second)
		h.sys.Root.Send(h.pid, resolveSoon)
		if _, d := h.next(); d != 0 {
			t.Fatalf("a lookup asked for 5s after the last came after %v, want at once", d)
		}
	})
}

// A lookup that fails, or finds nothing, keeps the last good set (with the
// error, and the time of the last good lookup), is tried again after 1 s,
// 2 s, 4 s... up to Refresh, and logs once when it starts failing and once
// when it succeeds again.
func TestAFailingLookupKeepsTheLastSetAndLogsOncePerChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newResolverHarness(t, 5*time.Second)
		good, _ := h.next()
		h.res.Fail(errors.New("SERVFAIL (test)"))
		h.next() // the lookup under way when it started failing
		// 1 s, 2 s, 4 s, then the refresh (5 s, less up to 10%: its jitter).
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
		for i, w := range want {
			if i == 3 {
				h.res.Set() // nothing found: failing all the same
			}
			m, d := h.next()
			if m.Err == nil || len(m.Addrs) != 1 || m.At != good.At {
				t.Fatalf("failed lookup %d: %+v, want the last set, its time and an error", i+1, m)
			}
			lo := w
			if w == 5*time.Second {
				lo = w - w/10
			}
			if i > 0 && (d > w || d < lo) { // the first follows a lookup that succeeded
				t.Fatalf("failed lookup %d came %v after the last, want %v", i+1, d, w)
			}
		}
		if n := h.logs.Count(slog.LevelWarn, msgFailing); n != 1 {
			t.Fatalf("%d warnings while failing, want 1", n)
		}
		h.res.Set(loopbacks.Addr(3), loopbacks.Addr(4))
		m, _ := h.next()
		if m.Err != nil || len(m.Addrs) != 2 || !m.At.After(good.At) {
			t.Fatalf("recovered: %+v, want the new set", m)
		}
		h.next()
		if n := h.logs.Count(slog.LevelInfo, msgRecovered); n != 1 {
			t.Fatalf("%d recovery notes, want 1", n)
		}
	})
}

// A route that starts watching gets the last answer at once; the addresses
// are given as dials use them: IPv4-mapped ones as IPv4, each once.
func TestALateRouteGetsTheLastAnswerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newResolverHarness(t, time.Minute)
		h.res.Set(netip.MustParseAddr("::ffff:127.0.0.2"), loopbacks.Addr(2), loopbacks.Addr(3))
		h.sys.Root.Send(h.pid, resolveSoon)
		h.next()
		m, _ := h.next()
		late := make(chan *EndpointsResolved, 1)
		w := h.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &watcher{out: late} }))
		h.sys.Root.Send(h.pid, &EndpointsWatched{Route: w})
		synctest.Wait()
		select {
		case got := <-late:
			if got != m || len(got.Addrs) != 2 || got.Addrs[0] != loopbacks.Addr(2) {
				t.Fatalf("late route got %+v, want the last answer, 127.0.0.2 once then 127.0.0.3", got)
			}
		default:
			t.Fatal("the late route got nothing")
		}
	})
}

// Stopping a resolver ends its lookup, even one that hangs.
func TestStoppingAResolverEndsItsHangingLookup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newResolverHarness(t, time.Minute)
		h.next()
		h.res.Hang()
		h.sys.Root.Send(h.pid, resolveSoon)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := h.res.Lookups(); n != 2 {
			t.Fatalf("%d lookups, want 2 (the second hangs)", n)
		}
		// The cleanup stops the resolver and waits for its lookup: it ends
		// within the bubble, or the test never returns.
	})
}

// endpointsRoute stands in for a route actor under the supervisor: it says
// what its host's resolver tells it, and hands over the resolver's PID.
type endpointsRoute struct {
	key       route.Key
	events    chan string
	resolvers chan *actor.PID
}

func (r *endpointsRoute) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*EndpointsResolved); ok {
		r.events <- r.key.Identity + "@" + r.key.Host + " resolved " + m.Addrs[0].String()
		r.resolvers <- m.From
	}
}

// The supervisor starts one resolver per host name (not per route, nor for an
// IP literal), stops it with the host's last route, and replaces one that
// failed for the routes still there.
func TestTheSupervisorKeepsOneResolverPerHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res := &loopbacks.Resolver{}
		res.Set(loopbacks.Addr(2))
		resolvers := make(chan *actor.PID, 16)
		h := newSupHarness(t, 8, func(hh *supHarness, cfg *SupervisorConfig) {
			cfg.Route.Endpoints = &EndpointsConfig{Resolver: res, Refresh: time.Hour, Timeout: time.Second,
				Life: cfg.Route.Life, Go: cfg.Go, Logger: quiet}
			cfg.NewRoute = func(k route.Key, _ *RouteConfig, _ *actor.PID, _ routeParts) actor.Producer {
				return func() actor.Actor { return &endpointsRoute{key: k, events: hh.events, resolvers: resolvers} }
			}
		})
		start := func(host, id string) *actor.PID {
			tk := &wait.Ticket[*routeHandle]{}
			h.sys.Root.Send(h.sup, &RouteRequest{Key: route.Key{Scheme: "http", Host: host, Port: "80", Identity: id}, Ticket: tk})
			rh, err := result(t, tk)
			if err != nil {
				t.Fatal(err)
			}
			return rh.PID
		}
		lookups := func(want int) {
			t.Helper()
			synctest.Wait()
			if n := res.Lookups(); n != want {
				t.Fatalf("%d lookups, want %d", n, want)
			}
		}
		alice := start("svc.test", "alice")
		h.expect("alice@svc.test resolved 127.0.0.2")
		first := <-resolvers
		bob := start("svc.test", "bob")
		h.expect("bob@svc.test resolved 127.0.0.2")
		if pid := <-resolvers; pid.Id != first.Id {
			t.Fatalf("bob's resolver %v, alice's %v: want one per host", pid, first)
		}
		start("127.0.0.9", "")
		h.nothing()
		lookups(1)

		h.sys.Root.Stop(first) // as if it failed: a new one serves both routes
		h.expectAll("alice@svc.test resolved 127.0.0.2", "bob@svc.test resolved 127.0.0.2")
		second := <-resolvers
		if pid := <-resolvers; second.Id == first.Id || pid.Id != second.Id {
			t.Fatalf("resolvers %v and %v after %v failed, want one new one", second, pid, first)
		}
		lookups(2)

		h.sys.Root.Stop(alice)
		h.sys.Root.Stop(bob)
		synctest.Wait()
		start("svc.test", "carol") // the host's last route stopped its resolver: a new one looks up
		h.expect("carol@svc.test resolved 127.0.0.2")
		if pid := <-resolvers; pid.Id == second.Id {
			t.Fatal("the resolver of a host without routes was kept")
		}
		lookups(3)
	})
}
