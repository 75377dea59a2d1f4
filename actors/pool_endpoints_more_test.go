package actors

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/faultserver"
	"github.com/connactor/connactor/internal/testkit/loopbacks"
	"github.com/connactor/connactor/internal/testkit/proxytest"
	"github.com/connactor/connactor/route"
)

// h2cOnly is HTTP/2 with prior knowledge, and nothing else.
func h2cOnly() *http.Protocols {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return p
}

// An HTTP/2 connection to an address that leaves the answer takes no new
// stream: new requests go to a new connection at the address left, the
// streams in flight end as usual, and the connection closes after the last.
func TestAnHTTP2ConnectionToARemovedAddressDrainsItsStreams(t *testing.T) {
	a, b := loopbacks.Addr(2), loopbacks.Addr(3)
	f := newEPFixture(t, PoolConfig{Protocols: h2cOnly()}, loopbacks.Options{H2C: true}, a, b)
	inFlight := f.hold(1) // one stream: a second would open a connection to the other address
	counts := f.srv.Counts()
	if counts[a].Accepted+counts[b].Accepted != 1 {
		t.Fatalf("one stream on %v, want one connection", counts)
	}
	from, to := a, b
	if counts[b].Accepted == 1 {
		from, to = b, a
	}
	f.resolved(to)
	e, _ := f.endpoint(from)
	if !e.Draining || e.Open != 1 || e.Leased != 1 {
		t.Fatalf("the drained address's endpoint %+v, want draining with its connection leased", e)
	}
	more := f.hold(2)
	if c := f.srv.Counts(); c[from].Accepted != 1 || c[to].Accepted != 1 || c[to].Requests != 2 {
		t.Fatalf("new streams: %v, want them on one new connection to %v", c, to)
	}
	if errs := inFlight.release(); len(errs) > 0 {
		t.Fatalf("streams in flight on the drained connection failed: %v", errs)
	}
	f.waitServer("the drained connection closed after its last stream", func(c map[netip.Addr]loopbacks.Counts) bool {
		return c[from].Open() == 0
	})
	if errs := more.release(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if n := f.route().ClosedBy[string(route.ReasonEndpointGone)]; n != 1 {
		t.Fatalf("%d connections closed as endpoint_removed, want 1", n)
	}
}

// Over TLS, a connection dialed to an address still verifies the host's name
// (and says it in SNI): the certificate names svc.test only.
func TestATLSConnectionToAnAddressVerifiesTheHostName(t *testing.T) {
	cert, err := faultserver.NewCert(faultserver.CertSpec{DNSNames: []string{"svc.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	srvTLS := &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	h1 := new(http.Protocols)
	h1.SetHTTP1(true) // a connection per request, to see both addresses
	f := newEPFixture(t, PoolConfig{TLSConfig: &tls.Config{RootCAs: cert.Pool}, Protocols: h1},
		loopbacks.Options{TLS: srvTLS}, loopbacks.Addr(2), loopbacks.Addr(3))
	h := f.hold(2)
	for _, e := range f.route().Endpoints {
		if e.Open != 1 {
			t.Fatalf("endpoints %+v, want one connection each", f.route().Endpoints)
		}
	}
	if errs := h.release(); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// Through a proxy, the endpoints are the proxy's addresses.
func TestThroughAProxyTheEndpointsAreTheProxys(t *testing.T) {
	proxy := proxytest.NewHTTPProxy()
	t.Cleanup(proxy.Close)
	_, port, _ := net.SplitHostPort(proxy.URL.Host)
	f := newEPFixture(t, PoolConfig{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy.test:" + port})},
		loopbacks.Options{}, loopbacks.Addr(2))
	f.res.Set(netip.MustParseAddr("127.0.0.1")) // every name: the proxy's
	target := fmt.Sprintf("http://%v/", f.srv.AddrPort(loopbacks.Addr(2)))
	resp, err := roundTrip(f.p, newGet(t, target))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	st := f.route()
	if len(st.Endpoints) != 1 || st.Endpoints[0].Addr.String() != "127.0.0.1:"+port || st.Endpoints[0].Dials != 1 {
		t.Fatalf("endpoints %+v, want the proxy's address", st.Endpoints)
	}
	if proxy.Conns() != 1 || f.srv.Counts()[loopbacks.Addr(2)].Requests != 1 {
		t.Fatalf("the proxy took %d connections, the target %v", proxy.Conns(), f.srv.Counts())
	}
}

// MaxConnsPerRoute counts the connections to all of a route's addresses.
func TestALimitCountsEveryAddressOfTheRoute(t *testing.T) {
	f := newEPFixture(t, PoolConfig{MaxConnsPerRoute: 4}, loopbacks.Options{}, loopbacks.Addrs(2, 4)...)
	h := f.hold(4)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- f.get("/") }() // waits for one of the four, then ends
	}
	eventually(t, "two callers waiting", func() bool { return f.route().Pending == 2 })
	if n := total(f.srv.Counts(), loopbacks.Counts.Open); n != 4 {
		t.Fatalf("%d connections open over three addresses, want MaxConnsPerRoute (4)", n)
	}
	if errs := h.release(); len(errs) > 0 {
		t.Fatal(errs)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := total(f.srv.Counts(), func(c loopbacks.Counts) int { return c.Accepted }); n != 4 {
		t.Fatalf("%d connections accepted, want 4", n)
	}
}

// newNetHTTPFixture is startEPServer with net/http's Transport as the client:
// its dials look svc.test up through the fixture's resolver and try the
// addresses in order, as net.Dialer does.
func newNetHTTPFixture(t *testing.T, opt loopbacks.Options, addrs ...netip.Addr) *epFixture {
	t.Helper()
	f := startEPServer(t, opt, addrs...)
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := f.res.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, err
		}
		first := errors.New("no address")
		var d net.Dialer
		for i, ip := range ips {
			c, err := d.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
			if err == nil {
				return c, nil
			}
			if i == 0 {
				first = err
			}
		}
		return nil, first
	}}
	t.Cleanup(tr.CloseIdleConnections)
	f.do = tr.RoundTrip
	return f
}

// changeScript drops a from the answer while the client has connections
// there, idle and in flight, then shuts a down gracefully, as a rolling
// restart does, and goes on with requests; it returns the failures of each
// step. settle waits until the client has the new answer (nothing for
// net/http, whose every dial looks up).
func changeScript(t *testing.T, f *epFixture, settle func()) map[string][]error {
	a, b, c, d := loopbacks.Addr(2), loopbacks.Addr(3), loopbacks.Addr(4), loopbacks.Addr(5)
	failed := map[string][]error{}
	f.res.Set(a, b, c)
	warm := f.hold(6)
	failed["warm-up"] = warm.release()
	inFlight := f.hold(6)
	f.res.Set(b, c, d)
	settle()
	shut := make(chan error, 1)
	go func() { shut <- f.srv.Shutdown(t.Context(), a) }() // ends once a's requests in flight are answered
	failed["in flight across the change"] = inFlight.release()
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
	failed["sequential after the change"] = nil
	for i := range 10 {
		if err := f.get("/"); err != nil {
			failed["sequential after the change"] = append(failed["sequential after the change"], fmt.Errorf("%d: %w", i, err))
		}
	}
	failed["concurrent after the change"] = f.hold(8).release()
	return failed
}

// An answer that changes, its dropped address then shut down, fails no
// request that net/http's Transport does not fail on the same kind of server.
func TestAnAnswerChangeFailsNothingNetHTTPWouldNot(t *testing.T) {
	addrs := loopbacks.Addrs(2, 5)
	ours := newEPFixture(t, PoolConfig{MaxConnsPerRoute: 12}, loopbacks.Options{}, addrs...)
	ours.res.Set(addrs[:3]...)
	if err := ours.get("/"); err != nil { // the route and its resolver start
		t.Fatal(err)
	}
	got := changeScript(t, ours, func() { ours.resolved(addrs[1:]...) })
	theirs := newNetHTTPFixture(t, loopbacks.Options{}, addrs...)
	want := changeScript(t, theirs, func() {})
	for step, errs := range got {
		t.Logf("%s: connactor %d failed, net/http %d", step, len(errs), len(want[step]))
		if len(errs) > len(want[step]) {
			t.Errorf("%s: connactor failed %v, net/http %v", step, errs, want[step])
		}
	}
	if n := ours.srv.Counts()[addrs[0]].Open(); n != 0 {
		t.Errorf("%d connections left to the dropped address", n)
	}
}

// errLookup is the resolver's failure in the tests that script one.
var errLookup = errors.New("lookup failed (test)")

// While a host's first lookup has failed, its route dials by name, through the
// resolver as net/http's dialer would: a request fails with the lookup's error,
// wrapped as a dial error. Once a lookup succeeds, the route has endpoints.
func TestBeforeAGoodLookupARouteDialsByName(t *testing.T) {
	a := loopbacks.Addr(2)
	f := newEPFixture(t, PoolConfig{}, loopbacks.Options{}, a)
	f.res.Fail(errLookup)
	err := f.get("/")
	var op *net.OpError
	if !errors.Is(err, errLookup) || !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("GET while lookups fail: %v, want a dial error around the lookup's", err)
	}
	if st := f.route(); len(st.Endpoints) != 0 || !strings.Contains(st.ResolveErr, errLookup.Error()) {
		t.Fatalf("route %+v, want no endpoint and the lookup's error", st)
	}
	f.resolved(a)
	if err := f.get("/"); err != nil {
		t.Fatal(err)
	}
	if e, ok := f.endpoint(a); !ok || e.Dials != 1 || e.Open != 1 {
		t.Fatalf("endpoint %+v, want its one connection", e)
	}
}

// A lookup that fails, finds nothing or hangs keeps the last good set, shows
// in the stats, and fails or delays no request, new connections included.
func TestALookupThatFailsKeepsTheLastGoodSet(t *testing.T) {
	a, b := loopbacks.Addr(2), loopbacks.Addr(3)
	f := newEPFixture(t, PoolConfig{}, loopbacks.Options{}, a, b)
	if err := f.get("/"); err != nil {
		t.Fatal(err)
	}
	// keeps checks that the route keeps both addresses and the time of the
	// last good lookup, and serves new connections there.
	keeps := func(what string) time.Time {
		t.Helper()
		good := f.route().ResolvedAt
		f.p.CloseIdle()
		h := f.hold(4)
		st := f.route()
		if len(st.Endpoints) != 2 || st.Endpoints[0].Draining || st.Endpoints[1].Draining {
			t.Fatalf("%s: endpoints %+v, want both kept", what, st.Endpoints)
		}
		if errs := h.release(); len(errs) > 0 {
			t.Fatalf("%s: %v", what, errs)
		}
		if st := f.route(); st.ResolvedAt != good {
			t.Fatalf("%s: resolved at %v, want the last good lookup's time %v", what, st.ResolvedAt, good)
		}
		return good
	}
	f.res.Fail(errors.New("SERVFAIL (test)"))
	f.lookups(2)
	good := keeps("a failed lookup")
	if st := f.route(); !strings.Contains(st.ResolveErr, "SERVFAIL (test)") {
		t.Fatalf("resolve error %q, want the lookup's", st.ResolveErr)
	}
	f.res.Set()
	f.lookups(2)
	keeps("a lookup that found nothing")
	if st := f.route(); !strings.Contains(st.ResolveErr, "no address") {
		t.Fatalf("resolve error %q, want no address", st.ResolveErr)
	}

	f.resolved(a, b)
	st := f.route()
	if st.ResolveErr != "" || !st.ResolvedAt.After(good) {
		t.Fatalf("after a good lookup: error %q, resolved at %v", st.ResolveErr, st.ResolvedAt)
	}
	f.res.Hang()
	f.lookups(1) // the lookups before it have ended, and the route heard of them
	keeps("a lookup that hangs")
}
