package actors

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/internal/testkit/faultserver"
)

// crashHook makes the actor of kind ("route", "supervisor") that receives a
// crashNow panic, through PoolConfig.Fault: a bug, injected.
func crashHook(kind string, msg any) {
	if c, ok := msg.(*crashNow); ok && c.kind == kind {
		panic("injected " + kind + " failure")
	}
}

// waitingCallers starts n requests to url that queue behind a connection the
// test holds, and returns their outcomes.
func waitingCallers(t *testing.T, p *Pool, url string, n int) chan error {
	t.Helper()
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() { // ends with its request: the crash answers it
			resp, err := roundTrip(p, newGet(t, url))
			if err == nil {
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	eventually(t, "the callers queued", func() bool { return snapshot(t, p).Pending == n })
	return errs
}

// holdOne leases the route's only connection with a request whose response
// body the test keeps open.
func holdOne(t *testing.T, p *Pool, url string) *http.Response {
	t.Helper()
	resp, err := roundTrip(p, newGet(t, url))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// A route actor that panics while 50 callers wait answers every one of them
// with an error within 100 ms, not at Close; the pool keeps serving new
// requests within its limits.
func TestARouteActorThatPanicsAnswersItsFiftyWaitersAtOnce(t *testing.T) {
	srv := okServer(t)
	p := newTestPool(t, PoolConfig{MaxConnsPerRoute: 1, MaxConnsTotal: 1, Fault: crashHook})
	held := holdOne(t, p, srv.URL())
	errs := waitingCallers(t, p, srv.URL(), 50)
	h := p.cachedRoute(t)

	start := time.Now()
	p.sys.Root.Send(h.PID, &crashNow{kind: "route"})
	var slowest time.Duration
	for i := 0; i < 50; i++ {
		err := <-errs
		if d := time.Since(start); d > slowest {
			slowest = d
		}
		if !errors.Is(err, ErrRouteFailed) || !errors.Is(err, ErrNotSent) {
			t.Fatalf("waiter %d: %v, want a route failure that was not sent", i, err)
		}
	}
	t.Logf("50 waiters answered within %v of the panic", slowest)
	if slowest > 100*time.Millisecond {
		t.Fatalf("the last waiter was answered %v after the panic, want within 100ms", slowest)
	}
	held.Body.Close() // its connection died with the route: nothing to release
	// A request racing the crash may still reach the dying route (and fail as
	// not sent); once its Done is closed, requests go to a new route actor.
	<-h.Done
	if got := get(t, p, srv.URL()); got != faultserver.Body("") {
		t.Fatalf("after the crash: %q", got)
	}
	st := snapshot(t, p)
	if st.RouteFailures != 1 || st.Connections > 1 || st.Leased != 0 || st.Pending != 0 {
		t.Fatalf("after the crash: %+v", st)
	}
	waitOpenAtMost(t, srv, 1)
}

// A supervisor that panics while callers wait is restarted; every waiter is
// answered with an error at once, and the pool serves new requests within its
// limits.
func TestASupervisorThatPanicsAnswersEveryWaiterAndKeepsServing(t *testing.T) {
	srv := okServer(t)
	p := newTestPool(t, PoolConfig{MaxConnsPerRoute: 1, MaxConnsTotal: 1, Fault: crashHook})
	held := holdOne(t, p, srv.URL())
	errs := waitingCallers(t, p, srv.URL(), 20)

	start := time.Now()
	p.sys.Root.Send(p.sup, &crashNow{kind: "supervisor"})
	for i := 0; i < 20; i++ {
		if err := <-errs; !errors.Is(err, ErrRouteFailed) {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("waiters answered %v after the panic, want within 100ms", d)
	}
	held.Body.Close()
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The first requests may still meet the restart: ask until served.
			for try := 0; ; try++ {
				resp, err := roundTrip(p, newGet(t, srv.URL()))
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					return
				}
				if try == 50 || !errors.Is(err, ErrNotSent) {
					t.Errorf("after the restart: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := snapshot(t, p); st.Connections > 1 {
		t.Fatalf("after the restart: %+v", st)
	}
	waitOpenAtMost(t, srv, 1)
}

// cachedRoute returns the one route the pool knows.
func (p *Pool) cachedRoute(t *testing.T) *routeHandle {
	t.Helper()
	var h *routeHandle
	p.routes.Range(func(_, v any) bool { h = v.(*routeHandle); return false })
	if h == nil {
		t.Fatal("no route cached")
	}
	return h
}

// A connection actor that panics while callers wait: the request it was
// serving gets an error at once (nothing sent), the route closes the
// connection and dials another, and every waiting caller is served, within
// the limit.
func TestAConnectionActorThatPanicsFailsOnlyItsOwnRequest(t *testing.T) {
	srv := okServer(t)
	p := newTestPool(t, PoolConfig{MaxConnsPerRoute: 1, MaxConnsTotal: 1, Fault: func(kind string, msg any) {
		if m, ok := msg.(*conn.ExchangeRequest); ok && kind == "conn" && m.Req.URL.Path == "/crash" {
			panic("injected connection failure")
		}
	}})
	get(t, p, srv.URL()) // a connection, idle
	start := time.Now()
	crashed := make(chan error, 1)
	go func() {
		_, err := roundTrip(p, newGet(t, srv.URL()+"/crash"))
		crashed <- err
	}()
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		go func() {
			resp, err := roundTrip(p, newGet(t, srv.URL()))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	err := <-crashed
	if !errors.Is(err, conn.ErrConnActorFailed) || !errors.Is(err, ErrNotSent) {
		t.Fatalf("the crashed request: %v", err)
	}
	t.Logf("the crashed request failed %v after it was sent", time.Since(start))
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Fatalf("the crashed request failed after %v, want within 100ms", d)
	}
	for i := 0; i < 20; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("waiter %d: %v", i, err)
		}
	}
	st := snapshot(t, p)
	if st.Routes[0].ClosedBy["error"] < 1 || st.Connections > 1 || st.Leased != 0 {
		t.Fatalf("after the crash: %+v", st.Routes[0])
	}
	waitOpenAtMost(t, srv, 1)
}
