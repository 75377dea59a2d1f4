package client

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/connactor/connactor/internal/testkit/footprint"
)

// manyRoutes is how many routes TestRoutesUsedOnceAreReclaimed uses: 1,000,
// or $CONNACTOR_ROUTES (RELIABILITY.md's run has 100,000).
func manyRoutes(t *testing.T) int {
	s := os.Getenv("CONNACTOR_ROUTES")
	if s == "" {
		return 1000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		t.Fatalf("CONNACTOR_ROUTES=%q: want a number of routes", s)
	}
	return n
}

// Routes used once each (a crawler's, a webhook sender's), 64 callers at a
// time, each route a host name of its own dialed to one server, under
// MaxConnsTotal 5,000, in a testing/synctest bubble over the in-memory
// network (the clock is the bubble's; no descriptors are used), in two waves
// of as many new routes. Right after a wave, its routes, their idle
// connections and the spare actors of the evicted ones are all there; once
// each route has been unused for MaxIdleTime, and one expiry tick more, every
// route has reclaimed itself, and the heap, the goroutines and the actors are
// back: after the second wave, within 10% of where they were after the first,
// so that a process that calls ever new hosts stays bounded. Before the first
// wave, what a process pays once was paid (footprint.Warm: the actor
// registry's shards, the runtime's goroutine records); what the first wave
// adds to that and keeps is what holding that many routes at once costs for
// good: the room that protoactor's registry shards and the bubble's timer
// heap keep for the most they held at once (RELIABILITY.md has the figures
// of 100,000 routes); TestRoutesUsedOnceAreReclaimedOnTheRealClock bounds it
// against the baseline.
func TestRoutesUsedOnceAreReclaimed(t *testing.T) {
	n := manyRoutes(t)
	inBubble(t, func(t *testing.T) {
		const idle = time.Minute
		w := startRouteWaves(t, n, idle)
		var rested footprint.Footprint
		for wave := range 2 {
			w.run(t, wave)
			synctest.Wait()
			used := footprint.Take(w.sys)
			routes, open, spares := routeCounts(w.c)

			time.Sleep(idle + w.tick)
			synctest.Wait()
			after := w.rested(t, wave, used, routes, open, spares)
			if wave == 1 && !after.Within(rested, 0.1) {
				t.Fatalf("after the second wave: %v; want within 10%% of after the first (%v)", after, rested)
			}
			rested = after
		}
	})
}

// The same on the real clock, one wave: there the runtime clears the timers
// a wave stops as it goes (a bubble keeps them in its timer heap while its
// clock stands still, which is what holds the bubble's heap above the
// baseline with many routes), and what is left over the baseline is what
// routes leave behind. MaxIdleTime is a millisecond per route (a second for
// make test's 1,000), more than a wave takes, so that every route is there at
// once right after it; the test then waits for the routes to reclaim
// themselves and for the goroutines and actors to be those of before, and
// wants the heap within 10% of the baseline.
func TestRoutesUsedOnceAreReclaimedOnTheRealClock(t *testing.T) {
	n := manyRoutes(t)
	idle := time.Duration(n) * time.Millisecond
	w := startRouteWaves(t, n, idle)
	w.run(t, 0)
	used := footprint.Take(w.sys)
	routes, open, spares := routeCounts(w.c)
	// Polls the pool's counts, the goroutines and the actors (not the heap,
	// whose measure costs two collections): no event tells when the
	// goroutines are back. The last route's Terminated (which the client's
	// fault hook would see reach the supervisor) is sent by the goroutine
	// that stops the route, which runs on after it, and the goroutines of the
	// server's side of the connections return when they see their
	// connection closed, unannounced.
	deadline := time.Now().Add(idle + w.tick + time.Minute)
	for {
		st, goroutines, actors := w.c.Stats(), runtime.NumGoroutine(), footprint.Actors(w.sys)
		if len(st.Routes) == 0 && st.RoutesReclaimed == uint64(n) && goroutines <= w.base.Goroutines && actors <= w.base.Actors {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after MaxIdleTime and a minute: %d routes left, %d reclaimed, %d goroutines, %d actors; want 0 and %d, and the goroutines and actors of before (%v)",
				idle, len(st.Routes), st.RoutesReclaimed, goroutines, actors, n, w.base)
		}
		time.Sleep(10 * time.Millisecond)
	}
	after := w.rested(t, 0, used, routes, open, spares)
	if !after.Within(w.base, 0.1) {
		t.Fatalf("after MaxIdleTime and a tick: %v; want within 10%% of before (%v)", after, w.base)
	}
}

// waveCallers is how many callers send a wave's requests at once.
const waveCallers = 64

// routeWaves is a client and an in-memory server for waves of routes used
// once, with the footprint measured before the first wave.
type routeWaves struct {
	c    *Client
	sys  *actor.ActorSystem
	port string
	n    int
	tick time.Duration
	base footprint.Footprint
}

// startRouteWaves makes the client (MaxConnsPerRoute 1, MaxConnsTotal
// 5,000, MaxIdleTime idle), warms what a process pays once, and measures the
// baseline.
func startRouteWaves(t *testing.T, n int, idle time.Duration) *routeWaves {
	const maxTotal = 5000
	srv, mem := newMemHTTPServer(t, hello)
	c := newClient(t, Config{MaxIdleTime: idle, MaxConnsTotal: maxTotal, MaxConnsPerRoute: 1,
		Logger: slog.New(slog.DiscardHandler), DialContext: mem.dial})
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	w := &routeWaves{c: c, sys: c.pool.System(), port: port, n: n, tick: c.cfg.expiryInterval()}
	footprint.Warm(w.sys, 2*min(n, maxTotal)+2*waveCallers) // the client's idle watches, the server's connections
	w.base = footprint.Take(w.sys)
	t.Logf("%d routes a wave, used once each by %d callers; MaxConnsTotal %d, MaxIdleTime %v, an expiry tick every %v\n"+
		"\tbefore: %v", n, waveCallers, maxTotal, idle, w.tick, w.base)
	return w
}

// run sends one GET to each of the wave's n new routes, waveCallers at a time.
func (w *routeWaves) run(t *testing.T, wave int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range waveCallers {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= w.n; i = int(next.Add(1)) {
				url := fmt.Sprintf("http://r%d.test:%s/", wave*w.n+i, w.port)
				req, _ := http.NewRequest(http.MethodGet, url, nil)
				resp, err := w.c.RoundTrip(req)
				if err != nil {
					t.Errorf("%s: %v", url, err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
}

// rested measures the footprint once the wave's routes have reclaimed
// themselves, logs the wave, and checks that every route is gone and the
// goroutines and actors are those of before.
func (w *routeWaves) rested(t *testing.T, wave int, used footprint.Footprint, routes, open, spares int) footprint.Footprint {
	t.Helper()
	after := footprint.Take(w.sys)
	st := w.c.Stats()
	t.Logf("wave %d:\n"+
		"\tright after: %v; %d routes, %d connections open, %d spare connection actors\n"+
		"\tafter MaxIdleTime and an expiry tick: %v; %d routes reclaimed in all",
		wave+1, used, routes, open, spares, after, st.RoutesReclaimed)
	if want := uint64((wave + 1) * w.n); len(st.Routes) != 0 || st.Open != 0 || st.RoutesReclaimed != want || st.RouteFailures != 0 {
		t.Fatalf("wave %d, after MaxIdleTime and a tick: %d routes, %d connections, %d reclaimed, %d route failures; want 0, 0, %d, 0",
			wave+1, len(st.Routes), st.Open, st.RoutesReclaimed, st.RouteFailures, want)
	}
	if after.Actors != w.base.Actors || after.Goroutines != w.base.Goroutines {
		t.Fatalf("wave %d, after MaxIdleTime and a tick: %v; want the actors and goroutines of before (%v)", wave+1, after, w.base)
	}
	return after
}

// routeCounts returns how many routes c has, how many connections are open,
// and how many spare connection actors its routes keep.
func routeCounts(c *Client) (routes, open, spares int) {
	st := c.Stats()
	for _, r := range st.Routes {
		spares += r.SpareActors
	}
	return len(st.Routes), st.Open, spares
}
