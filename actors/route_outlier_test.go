package actors

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/connactor/connactor/actors/outlier"
	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/internal/testkit/loopbacks"
	"github.com/connactor/connactor/route"
)

// The outlier rule (route_outlier.go) against the loopback server of the
// endpoint tests, one address of which misbehaves; the routes' clock is
// frozen (frozenClock), so that a back-off ends only when a test says so.

// frozenClock is a route clock that moves only when advanced.
type frozenClock struct{ off atomic.Int64 }

var frozenAt = time.Unix(1_800_000_000, 0)

func (c *frozenClock) now() time.Time                                       { return frozenAt.Add(time.Duration(c.off.Load())) }
func (c *frozenClock) advance(d time.Duration)                              { c.off.Add(int64(d)) }
func (f *epFixture) answer(sick func(netip.Addr, http.ResponseWriter) bool) { f.sick.Store(&sick) }

// answers503 makes a answer 503 to every request.
func answers503(bad netip.Addr) func(netip.Addr, http.ResponseWriter) bool {
	return func(a netip.Addr, w http.ResponseWriter) bool {
		if a != bad {
			return false
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	}
}

// ok releases h and fails the test on any of its requests' errors.
func (h *held) ok() {
	h.f.t.Helper()
	if errs := h.release(); len(errs) > 0 {
		h.f.t.Fatal(errs)
	}
}

// endpointOf returns a's endpoint once cond holds for it.
func (f *epFixture) endpointWhen(a netip.Addr, what string, cond func(route.EndpointStats) bool) route.EndpointStats {
	f.t.Helper()
	var e route.EndpointStats
	eventually(f.t, fmt.Sprintf("%v's endpoint %s", a, what), func() bool {
		var ok bool
		e, ok = f.endpoint(a)
		return ok && cond(e)
	})
	return e
}

// An address that answers 503 to every request is ejected at its
// ConsecutiveFailures-th failure in a row: its idle connection closes at
// once and the one that carried the failure as it comes free; no new
// connection or request goes to it until its back-off (1 s, jittered)
// ends; then its count of failures starts from zero, and a second run
// ejects it again, for twice as long (it never served in between).
func TestAnAddressAnswering503IsEjectedUntilItsBackOffEnds(t *testing.T) {
	a, b, c := loopbacks.Addr(2), loopbacks.Addr(3), loopbacks.Addr(4)
	clock := &frozenClock{}
	f := newEPFixture(t, PoolConfig{MaxConnsPerRoute: 6, Now: clock.now,
		Outlier: &outlier.Policy{ConsecutiveFailures: 4, MaxEjectedPercent: 50}}, loopbacks.Options{}, a, b, c)
	f.answer(answers503(c))

	f.hold(6).ok() // two connections to each address: c's first two failures
	if e, _ := f.endpoint(c); e.Open != 2 || e.Ejections != 0 || !e.EjectedUntil.IsZero() {
		t.Fatalf("after two failures c's endpoint is %+v, want 2 open and not ejected", e)
	}
	f.hold(6).ok() // the six again: c's third and fourth
	e := f.endpointWhen(c, "ejected with its connections closed", func(e route.EndpointStats) bool { return e.Open == 0 })
	if until := e.EjectedUntil.Sub(clock.now()); e.Ejections != 1 || e.EjectedBy != ejectedByExchanges ||
		until < 800*time.Millisecond || until > 1200*time.Millisecond || e.DialFailures != 0 {
		t.Fatalf("c's endpoint %+v (back-off %v), want one ejection for exchanges, 1 s ±20%%, no dial failure", e, until)
	}
	if n := f.route().ClosedBy[string(route.ReasonEjected)]; n != 2 {
		t.Fatalf("%d connections closed for the ejection, want 2 (the idle one and the one that failed)", n)
	}
	served := f.srv.Counts()[c]

	f.hold(6).ok() // the four idle connections and two new ones, none to c
	if got := f.srv.Counts()[c]; got.Accepted != served.Accepted || got.Requests != served.Requests {
		t.Fatalf("c, ejected, saw %+v, had %+v: want no new connection or request", got, served)
	}
	for _, x := range []netip.Addr{a, b} {
		if e, _ := f.endpoint(x); e.Open != 3 {
			t.Errorf("%v has %d connections, want 3", x, e.Open)
		}
	}

	clock.advance(2 * time.Second) // c's back-off is over
	f.p.CloseIdle()
	f.endpointWhen(a, "without connections", func(e route.EndpointStats) bool { return e.Open == 0 })
	f.hold(6).ok() // two new connections to each again: c's failures start from zero
	if e, _ := f.endpoint(c); e.Open != 2 || e.Ejections != 1 || !e.EjectedUntil.IsZero() {
		t.Fatalf("back from its ejection, after two failures c's endpoint is %+v, want 2 open and not ejected", e)
	}
	f.hold(6).ok()
	e = f.endpointWhen(c, "ejected again", func(e route.EndpointStats) bool { return e.Open == 0 })
	if until := e.EjectedUntil.Sub(clock.now()); e.Ejections != 2 || until < 1600*time.Millisecond || until > 2400*time.Millisecond {
		t.Fatalf("c's endpoint %+v (back-off %v), want two ejections, the second for 2 s ±20%%", e, until)
	}
	if tab := f.route().String(); !strings.Contains(tab, "ejected (its exchanges failed)") || !strings.Contains(tab, "ejected 2 times for failed exchanges") {
		t.Errorf("the route's table does not say why c is ejected:\n%s", f.route())
	}
}

// An exchange that ends in an error after its lease counts as a failure:
// here the server closes the connection after reading the request
// (ErrOutcomeUnknown). A dial that fails keeps its own path: counted in
// DialFailures, ejected by dials, never in Ejections.
func TestErrorsAfterTheLeaseCountAndDialErrorsKeepTheirPath(t *testing.T) {
	a, b, c := loopbacks.Addr(2), loopbacks.Addr(3), loopbacks.Addr(4)
	clock := &frozenClock{}
	f := newEPFixture(t, PoolConfig{MaxConnsPerRoute: 3, Now: clock.now,
		Outlier: &outlier.Policy{ConsecutiveFailures: 2}}, loopbacks.Options{}, a, b, c)
	f.answer(func(x netip.Addr, w http.ResponseWriter) bool {
		if x != c {
			return false
		}
		nc, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			nc.Close()
		}
		return true
	})
	for batch := 1; batch <= 2; batch++ { // one request on each address, c's on a new connection each time
		errs := f.hold(3).release()
		if len(errs) != 1 || !errors.Is(errs[0], ErrOutcomeUnknown) {
			t.Fatalf("batch %d: errors %v, want one ErrOutcomeUnknown (c's)", batch, errs)
		}
	}
	e := f.endpointWhen(c, "ejected", func(e route.EndpointStats) bool { return e.Ejections == 1 })
	if e.EjectedBy != ejectedByExchanges || e.DialFailures != 0 {
		t.Fatalf("c's endpoint %+v, want ejected by its exchanges, no dial failure", e)
	}

	f.srv.Down(b)
	clock.advance(2 * time.Second) // c is back, b refuses connections
	f.answer(func(netip.Addr, http.ResponseWriter) bool { return false })
	f.p.CloseIdle()
	f.endpointWhen(a, "without connections", func(e route.EndpointStats) bool { return e.Open == 0 })
	f.hold(3).ok() // b's dial fails; its request goes elsewhere
	e = f.endpointWhen(b, "ejected by its dials", func(e route.EndpointStats) bool { return e.DialFailures > 0 })
	if e.EjectedBy != ejectedByDials || e.Ejections != 0 {
		t.Fatalf("b's endpoint %+v, want ejected by dials, no ejection for exchanges", e)
	}
}

// A response the server cuts short after a good head counts as a failed
// exchange, over HTTP/1.1 (the connection closes mid-body) and HTTP/2 (the
// stream is reset mid-body): the address that does it is ejected.
func TestBodiesCutShortAfterAGoodHeadCountAsFailedExchanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  PoolConfig
		opt  loopbacks.Options
	}{
		{"HTTP/1.1", PoolConfig{}, loopbacks.Options{}},
		{"HTTP/2", PoolConfig{Protocols: h2cOnly()}, loopbacks.Options{H2C: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, c := loopbacks.Addr(2), loopbacks.Addr(3), loopbacks.Addr(4)
			clock := &frozenClock{}
			cfg := tc.cfg
			cfg.MaxConnsPerRoute, cfg.Now = 3, clock.now
			cfg.Outlier = &outlier.Policy{ConsecutiveFailures: 2}
			f := newEPFixture(t, cfg, tc.opt, a, b, c)
			f.answer(func(x netip.Addr, w http.ResponseWriter) bool {
				if x != c {
					return false
				}
				w.Header().Set("Content-Length", "1000")
				io.WriteString(w, "ten bytes.")
				http.NewResponseController(w).Flush() // a good head, and the body's start
				panic(http.ErrAbortHandler)           // then the connection (HTTP/1.1) or the stream (HTTP/2) is cut
			})
			cutShort := 0
			for batch := 0; batch < 20 && cutShort < 2; batch++ {
				for _, err := range f.hold(3).release() {
					var reset http2.StreamError
					if errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &reset) {
						cutShort++
						continue
					}
					t.Fatalf("batch %d: %v, want only bodies cut short", batch, err)
				}
			}
			if cutShort < 2 {
				t.Fatalf("%d bodies cut short in 20 batches: c got too few requests to test the rule", cutShort)
			}
			e := f.endpointWhen(c, "ejected", func(e route.EndpointStats) bool { return e.Ejections == 1 })
			if e.EjectedBy != ejectedByExchanges || e.DialFailures != 0 {
				t.Fatalf("c's endpoint %+v, want ejected by its exchanges, no dial failure", e)
			}
		})
	}
}

// Past MaxEjectedPercent the least recently ejected address serves: with
// 50% of three, one is held out at once. An ejection for failed exchanges
// counts in Ejections, not in DialFailures, and takes the dials' back-off.
func TestEndpointsPastTheOutlierCapLetTheLeastRecentlyEjectedServe(t *testing.T) {
	p := outlier.Policy{}.WithDefaults()
	s := endpointSet{outlier: &p}
	s.update(aps("127.0.0.2:80", "127.0.0.3:80", "127.0.0.4:80"))
	a, b, c := s.list[0], s.list[1], s.list[2]
	picks := func(now time.Time) map[*endpoint]bool {
		seen := map[*endpoint]bool{}
		rnd := seeded()
		for range 100 {
			p, _ := s.pick(now, rnd)
			seen[p] = true
		}
		return seen
	}
	s.exchangesFailed(b, t0, 0.5)
	if seen := picks(t0); seen[b] || !seen[a] || !seen[c] {
		t.Fatalf("b ejected: picked %v, want a and c only", seen)
	}
	if b.ejections != 1 || b.failures != 0 || b.ejectedUntil != t0.Add(EjectBase) {
		t.Fatalf("b: %d ejections, %d dial failures, until %v: want 1, 0, %v", b.ejections, b.failures, b.ejectedUntil, t0.Add(EjectBase))
	}
	later := t0.Add(100 * time.Millisecond)
	s.exchangesFailed(c, later, 0.5) // two of three: past 50%
	if seen := picks(later); seen[c] || !seen[a] || !seen[b] {
		t.Fatalf("b then c ejected: picked %v, want a and b (the least recently ejected)", seen)
	}
	s.failed(a, later.Add(time.Millisecond), 0.5) // all three: only the latest is held out
	if seen := picks(later.Add(time.Millisecond)); seen[a] || !seen[b] || !seen[c] {
		t.Fatalf("all ejected: picked %v, want b and c", seen)
	}
	var none endpointSet // without a policy, every ejected endpoint is passed over while one remains
	none.update(aps("127.0.0.2:80", "127.0.0.3:80", "127.0.0.4:80"))
	none.exchangesFailed(none.list[1], t0, 0.5)
	none.exchangesFailed(none.list[2], later, 0.5)
	for range 20 {
		if p, _ := none.pick(later, seeded()); p != none.list[0] {
			t.Fatalf("no policy: picked %v, want the one address not ejected", p.addr)
		}
	}
}

// A failed exchange, for the outlier rule: a 5xx head, or an error after
// the lease that says the server may have had the request and gave no head
// in time. The caller's own ends and errors before sending do not count.
func TestExchangeFailedCountsTheServersFailuresOnly(t *testing.T) {
	ctxErr := func(err error) error { return &conn.ExchangeError{Op: "read", Written: true, Err: err} }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a reset after the request was written", &conn.ExchangeError{Op: "read", Written: true, Err: errors.New("connection reset by peer")}, true},
		{"a response-header timeout", &conn.ExchangeError{Op: "read", Written: true, Err: fmt.Errorf("%w after 1s", conn.ErrResponseHeaderTimeout)}, true},
		{"an HTTP/2 stream reset", &h2.RoundTripError{Sent: true, Err: errors.New("stream error: INTERNAL_ERROR")}, true},
		{"the caller's cancel", ctxErr(context.Canceled), false},
		{"the caller's deadline", &h2.RoundTripError{Sent: true, Err: context.DeadlineExceeded}, false},
		{"nothing sent", &conn.ExchangeError{Op: "write", Err: errors.New("broken pipe")}, false},
		{"a refused HTTP/2 stream", &h2.RoundTripError{Err: h2.ErrRefused}, false},
		{"a stale connection", NotSent(conn.ErrStaleConn), false},
		{"the request body's own error", &conn.RequestBodyError{Written: true, Err: errors.New("body read failed")}, false},
		{"the connection actor failed", &conn.ExchangeError{Op: "read", Written: true, Err: conn.ErrConnActorFailed}, false},
	} {
		if got := exchangeFailed(tc.err); got != tc.want {
			t.Errorf("%s (%v): failed = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	for code, want := range map[int]bool{200: false, 404: false, 499: false, 500: true, 503: true, 504: true} {
		if got := headFailed(&http.Response{StatusCode: code}); got != want {
			t.Errorf("status %d: failed = %v, want %v", code, got, want)
		}
	}
}
