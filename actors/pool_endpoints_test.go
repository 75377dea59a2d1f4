package actors

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/loopbacks"
	"github.com/connactor/connactor/route"
)

// Endpoints against a server on loopback addresses 127.0.0.2 and up, one
// port, that counts the connections of each address; the host svc.test is
// looked up through a resolver the test sets (loopbacks.Resolver).

// epFixture is a pool whose route to svc.test spreads over the server's
// addresses as the resolver says.
type epFixture struct {
	t   *testing.T
	srv *loopbacks.Server
	res *loopbacks.Resolver
	p   *Pool
	url string // http://svc.test:port
	// do sends a request: through p, or net/http's Transport for the
	// fixture that compares with it (newNetHTTPFixture).
	do func(*http.Request) (*http.Response, error)

	gates sync.Map // "/hold/N" -> chan struct{}: closed to answer batch N
	batch atomic.Int64
	// sick, when set, answers instead of "ok" on the addresses it reports
	// true for (the outlier tests: a 503, a reset).
	sick atomic.Pointer[func(a netip.Addr, w http.ResponseWriter) bool]
}

// newEPFixture serves on addrs, sets the resolver to them and starts a pool
// with cfg (DNSRefresh 20ms unless set).
func newEPFixture(t *testing.T, cfg PoolConfig, opt loopbacks.Options, addrs ...netip.Addr) *epFixture {
	t.Helper()
	f := startEPServer(t, opt, addrs...)
	cfg.Resolver = f.res
	if cfg.DNSRefresh == 0 {
		cfg.DNSRefresh = 20 * time.Millisecond
	}
	f.p = newTestPool(t, cfg)
	f.do = func(req *http.Request) (*http.Response, error) { return roundTrip(f.p, req) }
	return f
}

// startEPServer serves on addrs and sets the resolver to them.
func startEPServer(t *testing.T, opt loopbacks.Options, addrs ...netip.Addr) *epFixture {
	t.Helper()
	if !loopbacks.Available() {
		t.Skip("SKIPPED: this machine cannot listen on 127.0.0.2 (Linux routes all of 127.0.0.0/8 to loopback; elsewhere, add the addresses)")
	}
	f := &epFixture{t: t, res: &loopbacks.Resolver{}}
	srv, err := loopbacks.Start(http.HandlerFunc(f.serve), opt, addrs...)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	t.Cleanup(srv.Close)
	f.res.Set(addrs...)
	scheme := "http"
	if opt.TLS != nil {
		scheme = "https"
	}
	f.url = fmt.Sprintf("%s://svc.test:%d", scheme, srv.Port())
	t.Cleanup(func() { f.gates.Range(func(_, ch any) bool { closeOnce(ch.(chan struct{})); return true }) })
	return f
}

var closeMu sync.Mutex

func closeOnce(ch chan struct{}) {
	closeMu.Lock()
	defer closeMu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// serve answers "ok" at once, or on /hold/N once batch N is released.
func (f *epFixture) serve(w http.ResponseWriter, r *http.Request) {
	if ch, ok := f.gates.Load(r.URL.Path); ok {
		select {
		case <-ch.(chan struct{}):
		case <-r.Context().Done():
			return
		}
	}
	if sick := f.sick.Load(); sick != nil {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && (*sick)(la.AddrPort().Addr().Unmap(), w) {
			return
		}
	}
	io.WriteString(w, "ok")
}

// held is a batch of requests the server holds until released.
type held struct {
	f    *epFixture
	gate chan struct{}
	errs chan error
	n    int
}

// hold starts n requests that the server holds, and returns once it has
// them all.
func (f *epFixture) hold(n int) *held {
	f.t.Helper()
	path := fmt.Sprintf("/hold/%d", f.batch.Add(1))
	h := &held{f: f, gate: make(chan struct{}), errs: make(chan error, n), n: n}
	f.gates.Store(path, h.gate)
	before := f.requests()
	for range n {
		go func() { h.errs <- f.get(path) }() // ends with its request, which release (or the cleanup) answers
	}
	f.waitServer(fmt.Sprintf("%d more requests", n), func(c map[netip.Addr]loopbacks.Counts) bool {
		return total(c, func(c loopbacks.Counts) int { return c.Requests }) >= before+n
	})
	return h
}

// release answers the batch and returns its requests' errors.
func (h *held) release() []error {
	closeOnce(h.gate)
	var errs []error
	for range h.n {
		if err := <-h.errs; err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// get sends a GET of path and reads its body.
func (f *epFixture) get(path string) error {
	req, err := http.NewRequest(http.MethodGet, f.url+path, nil)
	if err != nil {
		return err
	}
	resp, err := f.do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}

func (f *epFixture) requests() int {
	return total(f.srv.Counts(), func(c loopbacks.Counts) int { return c.Requests })
}

func total(cs map[netip.Addr]loopbacks.Counts, of func(loopbacks.Counts) int) int {
	n := 0
	for _, c := range cs {
		n += of(c)
	}
	return n
}

// waitServer waits (at most 10 s) until cond holds for the server's counts.
func (f *epFixture) waitServer(what string, cond func(map[netip.Addr]loopbacks.Counts) bool) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), 10*time.Second)
	defer cancel()
	if err := f.srv.Wait(ctx, cond); err != nil {
		f.t.Fatalf("the server did not see %s: %v; it saw %v", what, err, f.srv.Counts())
	}
}

// route returns the stats of the route to svc.test.
func (f *epFixture) route() route.Stats {
	f.t.Helper()
	for _, r := range snapshot(f.t, f.p).Routes {
		return r
	}
	f.t.Fatal("no route")
	return route.Stats{}
}

// endpoint returns the stats of a's endpoint, and whether the route has it.
func (f *epFixture) endpoint(a netip.Addr) (route.EndpointStats, bool) {
	for _, e := range f.route().Endpoints {
		if e.Addr == f.srv.AddrPort(a) {
			return e, true
		}
	}
	return route.EndpointStats{}, false
}

// resolved sets the resolver's answer and waits until the route has it: a
// lookup began after the change, and the route shows the set.
func (f *epFixture) resolved(addrs ...netip.Addr) {
	f.t.Helper()
	f.res.Set(addrs...)
	f.lookups(2)
	eventually(f.t, fmt.Sprintf("the route's endpoints %v", addrs), func() bool {
		live := 0
		for _, e := range f.route().Endpoints {
			if !e.Draining {
				live++
			}
		}
		for _, a := range addrs {
			if e, ok := f.endpoint(a); !ok || e.Draining {
				return false
			}
		}
		return live == len(addrs)
	})
}

// lookups waits until n more lookups have begun: with n = 2, one that began
// after now has ended (one at a time runs).
func (f *epFixture) lookups(n int) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(f.t.Context(), 10*time.Second)
	defer cancel()
	if err := f.res.WaitLookups(ctx, f.res.Lookups()+n); err != nil {
		f.t.Fatalf("no lookup: %v", err)
	}
}

// Three addresses, twelve connections: four to each (the fewest open first).
func TestARouteSpreadsItsConnectionsOverItsHostsAddresses(t *testing.T) {
	addrs := loopbacks.Addrs(2, 4)
	f := newEPFixture(t, PoolConfig{MaxConnsPerRoute: 12}, loopbacks.Options{}, addrs...)
	h := f.hold(12)
	for _, a := range addrs {
		if n := f.srv.Counts()[a].Accepted; n < 3 || n > 5 {
			t.Errorf("%v accepted %d connections, want 4 ±1: %v", a, n, f.srv.Counts())
		}
		if e, ok := f.endpoint(a); !ok || e.Open != 4 || e.Leased != 4 || e.Dials != 4 || e.Draining {
			t.Errorf("%v's endpoint %+v, want 4 open and leased of 4 dials", a, e)
		}
	}
	if errs := h.release(); len(errs) > 0 {
		t.Fatal(errs)
	}
	st := f.route()
	if st.ResolvedAt.IsZero() || st.ResolveErr != "" {
		t.Errorf("resolved at %v, error %q: want a time and no error", st.ResolvedAt, st.ResolveErr)
	}
}

// An address dropped from the answer drains: once the route has the new set,
// its idle connections are closed, no new connection goes to it, and the
// requests it serves end as usual, after which its connections close; the
// added address takes new connections. No request fails.
func TestAnAddressThatLeavesTheAnswerDrains(t *testing.T) {
	a, b, c, d := loopbacks.Addr(2), loopbacks.Addr(3), loopbacks.Addr(4), loopbacks.Addr(5)
	f := newEPFixture(t, PoolConfig{MaxConnsPerRoute: 12}, loopbacks.Options{}, a, b, c, d)
	f.res.Set(a, b, c)
	idle := f.hold(6) // two to each, then idle
	if errs := idle.release(); len(errs) > 0 {
		t.Fatal(errs)
	}
	inFlight := f.hold(6) // the idle six, leased again
	more := f.hold(3)     // three more connections, one to each
	atA := f.srv.Counts()[a]
	if atA.Open() != 3 {
		t.Fatalf("%v has %d connections open, want 3: %v", a, atA.Open(), f.srv.Counts())
	}
	if errs := more.release(); len(errs) > 0 { // idle again: one at a, b and c each
		t.Fatal(errs)
	}

	f.resolved(b, c, d)
	f.waitServer("a's idle connection closed", func(cs map[netip.Addr]loopbacks.Counts) bool { return cs[a].Open() == 2 })
	e, _ := f.endpoint(a)
	if !e.Draining || e.Open != 2 || e.Leased != 2 {
		t.Fatalf("a's endpoint %+v, want draining with its 2 leased connections", e)
	}
	fresh := f.hold(6) // two idle ones (b, c), then four new: to d first
	if got := f.srv.Counts()[a].Accepted; got != atA.Accepted {
		t.Fatalf("%v accepted %d connections after it left the answer, had %d", a, got, atA.Accepted)
	}
	if f.srv.Counts()[d].Accepted == 0 {
		t.Fatalf("the added address took no connection: %v", f.srv.Counts())
	}
	if errs := inFlight.release(); len(errs) > 0 {
		t.Fatalf("requests in flight on a drained address failed: %v", errs)
	}
	f.waitServer("a's leased connections closed after their responses", func(cs map[netip.Addr]loopbacks.Counts) bool {
		return cs[a].Open() == 0
	})
	if errs := fresh.release(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if _, ok := f.endpoint(a); ok {
		t.Fatalf("a drained address with no connection stays in the stats: %+v", f.route().Endpoints)
	}
	if n := f.route().ClosedBy[string(route.ReasonEndpointGone)]; n != 3 {
		t.Fatalf("%d connections closed as endpoint_removed, want a's 3", n)
	}
}

// fakeClock is the route actors' clock (PoolConfig.Now), moved by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// An address that refuses connections fails one dial, whose caller is served
// at another address; it is left alone for its back-off, and once that is
// over and it accepts again it takes connections again.
func TestAnAddressThatRefusesIsLeftAloneForItsBackOff(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	a, b, c := loopbacks.Addr(2), loopbacks.Addr(3), loopbacks.Addr(4)
	f := newEPFixture(t, PoolConfig{MaxConnsPerRoute: 12, Now: clock.Now}, loopbacks.Options{}, a, b, c)
	f.srv.Down(a)
	var hs []*held
	for range 3 { // one at a time: the third at the latest goes to a, fails, and is served elsewhere
		hs = append(hs, f.hold(1))
	}
	e, _ := f.endpoint(a)
	if e.Dials != 1 || e.DialFailures != 1 || e.EjectedUntil.IsZero() || e.Open != 0 {
		t.Fatalf("a's endpoint %+v, want one failed dial and an ejection", e)
	}
	hs = append(hs, f.hold(6)) // b and c only: a backs off
	if e, _ := f.endpoint(a); e.Dials != 1 {
		t.Fatalf("a was dialed %d times during its back-off", e.Dials)
	}
	if err := f.srv.Up(a); err != nil {
		t.Fatal(err)
	}
	clock.advance(EjectBase * 12 / 10) // the longest first back-off
	hs = append(hs, f.hold(3))         // a has none: all three go to it
	if got := f.srv.Counts()[a].Accepted; got != 3 {
		t.Fatalf("a accepted %d connections once back, want 3: %v", got, f.srv.Counts())
	}
	if e, _ := f.endpoint(a); !e.EjectedUntil.IsZero() || e.Open != 3 {
		t.Fatalf("a's endpoint %+v, want it up with 3 connections", e)
	}
	for _, h := range hs {
		if errs := h.release(); len(errs) > 0 {
			t.Fatalf("requests failed: %v", errs)
		}
	}
}
