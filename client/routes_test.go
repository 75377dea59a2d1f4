package client

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

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
// of 100,000 routes); TestRoutesUsedOnceAreReclaimedAfterMaxIdleTime in
// package actors bounds it for 2,000 routes.
func TestRoutesUsedOnceAreReclaimed(t *testing.T) {
	n := manyRoutes(t)
	const callers, maxTotal = 64, 5000
	inBubble(t, func(t *testing.T) {
		srv, mem := newMemHTTPServer(t, hello)
		const idle = time.Minute
		c := newClient(t, Config{MaxIdleTime: idle, MaxConnsTotal: maxTotal, MaxConnsPerRoute: 1,
			Logger: slog.New(slog.DiscardHandler), DialContext: mem.dial})
		_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		sys := c.pool.System()
		tick := c.cfg.expiryInterval()
		footprint.Warm(sys, 2*min(n, maxTotal)+2*callers) // the client's idle watches, the server's connections
		base := footprint.Take(sys)
		t.Logf("%d routes a wave, used once each by %d callers; MaxConnsTotal %d, MaxIdleTime %v, an expiry tick every %v\n"+
			"\tbefore: %v", n, callers, maxTotal, idle, tick, base)

		var rested footprint.Footprint
		for wave := range 2 {
			var next atomic.Int64
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for i := int(next.Add(1)); i <= n; i = int(next.Add(1)) {
						url := fmt.Sprintf("http://r%d.test:%s/", wave*n+i, port)
						req, _ := http.NewRequest(http.MethodGet, url, nil)
						resp, err := c.RoundTrip(req)
						if err != nil {
							t.Errorf("%s: %v", url, err)
							return
						}
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			synctest.Wait()
			used := footprint.Take(sys)
			routes, open, spares := routeCounts(c)

			time.Sleep(idle + tick)
			synctest.Wait()
			after := footprint.Take(sys)
			st := c.Stats()
			t.Logf("wave %d:\n"+
				"\tright after: %v; %d routes, %d connections open, %d spare connection actors\n"+
				"\tafter MaxIdleTime and an expiry tick: %v; %d routes reclaimed in all",
				wave+1, used, routes, open, spares, after, st.RoutesReclaimed)
			if len(st.Routes) != 0 || st.Open != 0 || st.RoutesReclaimed != uint64((wave+1)*n) || st.RouteFailures != 0 {
				t.Fatalf("wave %d, after MaxIdleTime and a tick: %d routes, %d connections, %d reclaimed, %d route failures; want 0, 0, %d, 0",
					wave+1, len(st.Routes), st.Open, st.RoutesReclaimed, st.RouteFailures, (wave+1)*n)
			}
			if after.Actors != base.Actors || after.Goroutines != base.Goroutines {
				t.Fatalf("wave %d, after MaxIdleTime and a tick: %v; want the actors and goroutines of before (%v)", wave+1, after, base)
			}
			if wave == 1 && !after.Within(rested, 0.1) {
				t.Fatalf("after the second wave: %v; want within 10%% of after the first (%v)", after, rested)
			}
			rested = after
		}
	})
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
