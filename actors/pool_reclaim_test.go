package actors

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/wait"
)

// A caller that holds the handle of a route that has just reclaimed itself
// is served all the same, by a new route. The race is made to happen: the
// supervisor is held busy, so that the reclaimed route is still there, its
// RouteReclaimed queued, when the caller's lease reaches it; the route
// refuses it, and the caller goes to the supervisor, which has seen
// RouteReclaimed first and starts a new route.
func TestACallerHoldingAReclaimedRoutesHandleIsServedByANewRoute(t *testing.T) {
	srv := okServer(t)
	gate, holding := make(chan struct{}), make(chan struct{})
	busy := &StatsRequest{Ticket: &wait.Ticket[StatsResponse]{}} // the supervisor message the hook holds
	oldLease := make(chan struct{}, 1)
	var old atomic.Pointer[routeHandle]
	p := newTestPool(t, PoolConfig{Fault: func(kind string, msg any) {
		switch m := msg.(type) {
		case *StatsRequest:
			if kind == "supervisor" && m == busy {
				close(holding)
				<-gate
			}
		case *LeaseRequest:
			if h := old.Load(); kind == "route" && h != nil && h.Pub.Reclaimed.Load() {
				select {
				case oldLease <- struct{}{}:
				default:
				}
			}
		}
	}})
	url := srv.URL() + "/"
	get(t, p, url)
	p.CloseIdle() // the route has no connection left
	key, err := p.Key(newGet(t, url), "")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := p.routes.Load(key)
	h := v.(*routeHandle)
	old.Store(h)

	// The supervisor is held busy on another goroutine: what is sent to it
	// now waits in its mailbox.
	held := make(chan struct{})
	go func() { // owned by the test: ends when gate closes
		defer close(held)
		p.sys.Root.Send(p.sup, busy)
	}()
	<-holding
	p.sys.Root.Send(h.PID, &ExpiryTicked{Now: time.Now().Add(2 * time.Minute)}) // unused for MaxIdleTime: it reclaims itself
	if !h.Pub.Reclaimed.Load() {
		t.Fatal("the route did not reclaim itself")
	}
	got := make(chan string, 1)
	go func() { // owned by the test: ends when its GET does
		resp, err := roundTrip(p, newGet(t, url))
		if err != nil {
			got <- err.Error()
			return
		}
		resp.Body.Close()
		got <- resp.Status
	}()
	select {
	case <-oldLease:
	case <-timeAfter10s():
		t.Fatal("the lease never reached the reclaimed route")
	}
	close(gate)
	<-held
	if s := <-got; s != "200 OK" {
		t.Fatalf("the GET that met the reclaimed route: %s, want 200 OK", s)
	}
	v, _ = p.routes.Load(key)
	if v == nil || v.(*routeHandle) == h {
		t.Fatal("the route cache still holds the reclaimed route")
	}
	<-h.Done
	if st := snapshot(t, p); st.RoutesReclaimed != 1 || st.RouteFailures != 0 || len(st.Routes) != 1 {
		t.Fatalf("%d routes reclaimed, %d failed, %d routes; want 1, 0, 1", st.RoutesReclaimed, st.RouteFailures, len(st.Routes))
	}
}

// Callers that come back to their routes at random while the routes reclaim
// themselves as soon as they can (MaxIdleTime and the expiry tick a
// millisecond): every request is served, whichever of a lease and a
// reclamation comes first.
func TestRoutesReclaimedWhileCallersComeBackFailNoRequest(t *testing.T) {
	srv := okServer(t)
	p := newTestPool(t, PoolConfig{MaxIdleTime: time.Millisecond, ExpiryInterval: time.Millisecond,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, srv.Addr())
		}})
	const callers, requests, routes = 8, 150, 4
	var wg sync.WaitGroup
	var failed atomic.Int64
	for c := range callers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for range requests {
				// Routes differ by name; all reach the server.
				url := fmt.Sprintf("http://r%d.test/", rng.IntN(routes))
				resp, err := roundTrip(p, newGet(t, url))
				if err != nil {
					failed.Add(1)
					t.Errorf("GET %s: %v", url, err)
					continue
				}
				resp.Body.Close()
				if rng.IntN(2) == 0 {
					p.CloseIdle() // no connection left: a route may reclaim itself at the next tick
				}
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // spreads the callers over the ticks
			}
		})
	}
	wg.Wait()
	st := snapshot(t, p)
	t.Logf("%d requests, %d failed, %d routes reclaimed", callers*requests, failed.Load(), st.RoutesReclaimed)
	if st.RoutesReclaimed == 0 {
		t.Fatal("no route reclaimed itself: the race was not run")
	}
	if st.RouteFailures != 0 {
		t.Fatalf("%d route failures", st.RouteFailures)
	}
	// Left alone, every route reclaims itself, and the pool keeps no handle.
	eventually(t, "every route reclaimed", func() bool { return len(snapshot(t, p).Routes) == 0 })
	cached := 0
	p.routes.Range(func(any, any) bool { cached++; return true })
	if cached != 0 {
		t.Fatalf("the pool still caches %d routes, all reclaimed", cached)
	}
}
