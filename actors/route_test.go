package actors

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/conc"
	"go.uber.org/goleak"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/route"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"))
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeSupervisor grants every PermitRequest at once and counts what routes tell it.
type fakeSupervisor struct {
	permits, closed atomic.Int32
	reasons         chan CloseReason
}

func (f *fakeSupervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *PermitRequest:
		f.permits.Add(1)
		ctx.Send(m.From, &PermitGranted{})
	case *PermitReturned:
		f.closed.Add(1)
	case *ConnClosed:
		f.closed.Add(1)
		select {
		case f.reasons <- m.Reason:
		default:
		}
	}
}

// routeHarness runs one route actor against a local server, driven by messages.
type routeHarness struct {
	t    *testing.T
	sys  *actor.ActorSystem
	pid  *actor.PID
	sup  *fakeSupervisor
	pub  *RoutePublished
	wg   conc.WaitGroup
	stop context.CancelFunc
	next uint64
}

func newRouteHarness(t *testing.T, max int, h http.Handler) *routeHarness {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	k, err := route.FromRequest(&http.Request{URL: u}, "", route.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rh := &routeHarness{t: t, sup: &fakeSupervisor{reasons: make(chan CloseReason, 64)}, pub: &RoutePublished{}}
	rh.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	life, cancel := context.WithCancel(context.Background())
	rh.stop = cancel
	cfg := &RouteConfig{
		MaxConnsPerRoute: max, MaxIdleTime: time.Minute, Life: life, Logger: quiet, Now: time.Now,
		Conn: &conn.Options{DialTimeout: 5 * time.Second, MaxResponseHeaderBytes: 1 << 20, Go: rh.wg.Go, Logger: quiet},
	}
	supPID := rh.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rh.sup }))
	rh.pid = rh.sys.Root.Spawn(actor.PropsFromProducer(NewRoute(k, cfg, supPID, rh.pub)))
	t.Cleanup(func() {
		rh.sys.Root.StopFuture(rh.pid).Wait()
		cancel()
		rh.wg.Wait()
		rh.sys.Shutdown()
	})
	return rh
}

// lease sends a LeaseRequest and returns its reply channel.
func (rh *routeHarness) lease() (uint64, chan LeaseResponse) {
	rh.next++
	reply := make(chan LeaseResponse, 1)
	rh.sys.Root.Send(rh.pid, &LeaseRequest{ID: rh.next, Reply: reply})
	return rh.next, reply
}

func (rh *routeHarness) granted(reply chan LeaseResponse) Lease {
	rh.t.Helper()
	select {
	case r := <-reply:
		if r.Err != nil {
			rh.t.Fatalf("lease refused: %v", r.Err)
		}
		return r.Lease
	case <-time.After(5 * time.Second):
		rh.t.Fatal("no lease granted")
	}
	return Lease{}
}

func notYet(t *testing.T, reply chan LeaseResponse) {
	t.Helper()
	select {
	case r := <-reply:
		t.Fatalf("answered too early: %+v", r)
	case <-time.After(20 * time.Millisecond):
	}
}

func (rh *routeHarness) stats() RouteStats {
	reply := make(chan RouteStats, 1)
	rh.sys.Root.Send(rh.pid, &RouteStatsRequest{Reply: reply})
	return <-reply
}

func TestRouteServesWaitersInArrivalOrder(t *testing.T) {
	rh := newRouteHarness(t, 1, http.NotFoundHandler())
	_, first := rh.lease()
	held := rh.granted(first)
	var replies []chan LeaseResponse
	for i := 0; i < 5; i++ {
		_, r := rh.lease()
		replies = append(replies, r)
	}
	if st := rh.stats(); st.Pending != 5 || st.Open != 1 {
		t.Fatalf("stats %+v", st)
	}
	for i, r := range replies {
		notYet(t, r)
		rh.sys.Root.Send(rh.pid, &Release{ConnID: held.ConnID, Reusable: true})
		held = rh.granted(r)
		if !held.Reused {
			t.Fatalf("waiter %d got a new connection", i)
		}
		for _, later := range replies[i+1:] {
			if len(later) != 0 {
				t.Fatalf("waiter after %d served before it", i)
			}
		}
	}
	if n := rh.sup.permits.Load(); n != 1 {
		t.Fatalf("route asked for %d permits with a limit of 1", n)
	}
}

func TestRouteAsksForNoMorePermitsThanItsLimit(t *testing.T) {
	rh := newRouteHarness(t, 3, http.NotFoundHandler())
	var replies []chan LeaseResponse
	for i := 0; i < 10; i++ {
		_, r := rh.lease()
		replies = append(replies, r)
	}
	for _, r := range replies[:3] {
		rh.granted(r)
	}
	if st := rh.stats(); st.Open != 3 || st.Leased != 3 || st.Pending != 7 {
		t.Fatalf("stats %+v", st)
	}
	if n := rh.sup.permits.Load(); n != 3 {
		t.Fatalf("%d permits for a limit of 3", n)
	}
}

func TestRouteRemovesACancelledWaiterAndAnswersIt(t *testing.T) {
	rh := newRouteHarness(t, 1, http.NotFoundHandler())
	_, first := rh.lease()
	held := rh.granted(first)
	id, waiting := rh.lease()
	_, behind := rh.lease()
	gone := errors.New("caller gave up")
	rh.sys.Root.Send(rh.pid, &LeaseCancel{ID: id, Err: gone})
	if r := <-waiting; !errors.Is(r.Err, gone) {
		t.Fatalf("cancelled waiter got %+v", r)
	}
	if st := rh.stats(); st.Pending != 1 {
		t.Fatalf("pending %d after cancel, want 1", st.Pending)
	}
	rh.sys.Root.Send(rh.pid, &Release{ConnID: held.ConnID, Reusable: true})
	rh.granted(behind) // the next waiter, not the cancelled one, gets the connection
	// A cancel that crosses a grant changes nothing: the caller releases.
	rh.sys.Root.Send(rh.pid, &LeaseCancel{ID: id, Err: gone})
	if st := rh.stats(); st.Pending != 0 || st.Leased != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRouteClosesAConnectionReleasedAsNotReusable(t *testing.T) {
	rh := newRouteHarness(t, 2, http.NotFoundHandler())
	_, r := rh.lease()
	l := rh.granted(r)
	rh.sys.Root.Send(rh.pid, &Release{ConnID: l.ConnID, Reusable: false})
	select {
	case reason := <-rh.sup.reasons:
		if reason != ReasonNotReusable {
			t.Fatalf("closed as %s", reason)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("supervisor not told of the close")
	}
	if st := rh.stats(); st.Open != 0 || st.ClosedBy[string(ReasonNotReusable)] != 1 {
		t.Fatalf("stats %+v", st)
	}
	_, r = rh.lease()
	if l2 := rh.granted(r); l2.Reused || l2.ConnID == l.ConnID {
		t.Fatalf("a discarded connection was leased again: %+v", l2)
	}
}

func TestRouteAnswersEveryWaiterWhenItStops(t *testing.T) {
	rh := newRouteHarness(t, 1, http.NotFoundHandler())
	_, first := rh.lease()
	rh.granted(first)
	var replies []chan LeaseResponse
	for i := 0; i < 3; i++ {
		_, r := rh.lease()
		replies = append(replies, r)
	}
	// Stop is a system message and overtakes user messages still in the
	// mailbox (the client's callers also watch its closed channel for that
	// case): make sure the waiters are queued first.
	if st := rh.stats(); st.Pending != 3 {
		t.Fatalf("pending %d", st.Pending)
	}
	rh.sys.Root.StopFuture(rh.pid).Wait()
	for _, r := range replies {
		if got := <-r; !errors.Is(got.Err, ErrRouteClosed) {
			t.Fatalf("waiter got %+v", got)
		}
	}
	if !rh.pub.Stopped.Load() {
		t.Fatal("route did not publish that it stopped")
	}
}

func TestRouteReportsADialFailureToTheOldestWaiter(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	rh := &routeHarness{t: t, sup: &fakeSupervisor{reasons: make(chan CloseReason, 8)}, pub: &RoutePublished{}}
	rh.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	life, cancel := context.WithCancel(context.Background())
	cfg := &RouteConfig{MaxConnsPerRoute: 1, Life: life, Logger: quiet, Now: time.Now,
		Conn: &conn.Options{DialTimeout: time.Second, MaxResponseHeaderBytes: 1 << 20, Go: rh.wg.Go, Logger: quiet}}
	host, port, _ := net.SplitHostPort(addr)
	supPID := rh.sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return rh.sup }))
	rh.pid = rh.sys.Root.Spawn(actor.PropsFromProducer(NewRoute(route.Key{Scheme: "http", Host: host, Port: port}, cfg, supPID, rh.pub)))
	defer func() {
		rh.sys.Root.StopFuture(rh.pid).Wait()
		cancel()
		rh.wg.Wait()
		rh.sys.Shutdown()
	}()
	_, a := rh.lease()
	_, b := rh.lease()
	var oe *net.OpError
	for _, r := range []chan LeaseResponse{a, b} {
		got := <-r
		if !errors.As(got.Err, &oe) {
			t.Fatalf("waiter got %+v, want the dial's *net.OpError", got)
		}
	}
	if st := rh.stats(); st.Open != 0 || st.Pending != 0 {
		t.Fatalf("stats after failed dials: %+v", st)
	}
}
