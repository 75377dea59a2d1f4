package client

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/connactor/connactor/internal/testkit/loopbacks"
	"github.com/connactor/connactor/telemetry"
	"go.opentelemetry.io/otel/attribute"
)

// Endpoints through the client's API: Config.Resolver, Config.DNSRefresh and
// RouteStats.Endpoints. The behaviour itself is actors' to test.

// loopbackService serves "ok" on addrs (one port) and returns the URL of
// svc.test there and a resolver that answers addrs.
func loopbackService(t *testing.T, addrs ...netip.Addr) (*loopbacks.Server, *loopbacks.Resolver, string) {
	t.Helper()
	if !loopbacks.Available() {
		t.Skip("SKIPPED: this machine cannot listen on 127.0.0.2 (Linux routes all of 127.0.0.0/8 to loopback; elsewhere, add the addresses)")
	}
	srv, err := loopbacks.Start(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }),
		loopbacks.Options{}, addrs...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	res := &loopbacks.Resolver{}
	res.Set(addrs...)
	return srv, res, fmt.Sprintf("http://svc.test:%d/", srv.Port())
}

// The stats of a route to a host name name its addresses, in the resolver's
// order, with the route's connections and dials to each, and its last lookup.
func TestRouteStatsNameTheHostsAddresses(t *testing.T) {
	addrs := loopbacks.Addrs(2, 3)
	srv, res, url := loopbackService(t, addrs...)
	c := newClient(t, Config{Resolver: res})
	get(t, c, url) // the route's first lookup
	c.CloseIdleConnections()
	get(t, c, url)
	st := c.Stats()
	if len(st.Routes) != 1 {
		t.Fatalf("routes %v", st.Routes)
	}
	r := st.Routes[0]
	if len(r.Endpoints) != 2 || r.ResolvedAt.IsZero() || r.ResolveErr != "" {
		t.Fatalf("route %+v, want both addresses and a good lookup", r)
	}
	dials, open := 0, 0
	for i, e := range r.Endpoints {
		if e.Addr != srv.AddrPort(addrs[i]) || e.Draining || !e.EjectedUntil.IsZero() {
			t.Errorf("endpoint %d: %+v, want %v, up", i, e, srv.AddrPort(addrs[i]))
		}
		dials, open = dials+int(e.Dials), open+e.Open
	}
	if dials != 2 || open != 1 {
		t.Errorf("endpoints %+v, want 2 dials and 1 connection open among them", r.Endpoints)
	}
	if !strings.Contains(r.String(), "endpoint "+srv.AddrPort(addrs[0]).String()+": up") {
		t.Errorf("the route's table names no endpoint:\n%s", r)
	}
}

// DNSRefresh -1 resolves at every dial, as net/http does: through the
// Resolver, with no endpoints kept.
func TestDNSRefreshMinusOneResolvesAtEveryDial(t *testing.T) {
	_, res, url := loopbackService(t, loopbacks.Addr(2))
	c := newClient(t, Config{Resolver: res, DNSRefresh: -1})
	for i := 1; i <= 3; i++ {
		get(t, c, url)
		c.CloseIdleConnections()
		if n := res.Lookups(); n != i {
			t.Fatalf("%d lookups after %d dials, want one per dial", n, i)
		}
	}
	if eps := c.Stats().Routes[0].Endpoints; len(eps) != 0 {
		t.Fatalf("endpoints %+v with DNSRefresh -1, want none", eps)
	}
}

// A DialContext alone is given the host name and decides; with a Resolver
// too, it is given the address the client chose.
func TestDialContextIsGivenTheHostNameOrTheChosenAddress(t *testing.T) {
	srv, res, url := loopbackService(t, loopbacks.Addr(2))
	for _, tc := range []struct {
		name     string
		resolver Resolver
		want     string
	}{
		{"DialContext alone", nil, fmt.Sprintf("svc.test:%d", srv.Port())},
		{"DialContext and Resolver", res, srv.AddrPort(loopbacks.Addr(2)).String()},
	} {
		var mu sync.Mutex
		var got []string
		dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			mu.Lock()
			got = append(got, addr)
			mu.Unlock()
			var d net.Dialer
			return d.DialContext(ctx, network, srv.AddrPort(loopbacks.Addr(2)).String())
		}
		c := newClient(t, Config{DialContext: dial, Resolver: tc.resolver})
		get(t, c, url)
		eps := c.Stats().Routes[0].Endpoints
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: dialed %v, want %q", tc.name, got, tc.want)
		}
		if (len(eps) > 0) != (tc.resolver != nil) {
			t.Errorf("%s: endpoints %+v", tc.name, eps)
		}
	}
}

// connactor.endpoint.open_connections shows each address's connections, and
// follows them as they close.
func TestTheEndpointGaugeShowsEachAddressesOpenConnections(t *testing.T) {
	addrs := loopbacks.Addrs(2, 3)
	srv, res, url := loopbackService(t, addrs...)
	o := newObserved(t, Config{Resolver: res, MaxConnsPerRoute: 4})
	var bodies []io.Closer
	for range 4 { // each response's body stays unread: its connection stays leased
		resp, err := o.c.RoundTrip(newGet(t, url))
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
	}
	open := func(a netip.Addr) int64 {
		return sumOf(o.collect(t), telemetry.MetricEndpointOpen,
			attribute.String("network.peer.address", a.String()), attribute.Int("network.peer.port", int(srv.Port())),
			attribute.String("server.address", "svc.test"))
	}
	for _, a := range addrs {
		if n := open(a); n != 2 {
			t.Errorf("%v: gauge %d, want 2 of the 4 connections (server: %v)", a, n, srv.Counts())
		}
	}
	for _, b := range bodies {
		b.Close()
	}
	o.c.CloseIdleConnections()
	waitFor(t, "the gauge at 0 for both addresses", func() bool { return open(addrs[0]) == 0 && open(addrs[1]) == 0 })
}

// Config.Outlier reaches the routes: an address that answers 503 is ejected
// for its exchanges once it has failed ConsecutiveFailures of them, and
// RouteStats says so (Ejections, EjectedBy) while the other serves.
func TestOutlierEjectsAnAddressAnswering503(t *testing.T) {
	if !loopbacks.Available() {
		t.Skip("SKIPPED: this machine cannot listen on 127.0.0.2 (Linux routes all of 127.0.0.0/8 to loopback; elsewhere, add the addresses)")
	}
	good, sick := loopbacks.Addr(2), loopbacks.Addr(3)
	srv, err := loopbacks.Start(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if la, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && la.AddrPort().Addr() == sick {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	}), loopbacks.Options{}, good, sick)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	res := &loopbacks.Resolver{}
	res.Set(good, sick)
	url := fmt.Sprintf("http://svc.test:%d/", srv.Port())
	c := newClient(t, Config{Resolver: res, Outlier: &OutlierPolicy{ConsecutiveFailures: 2}})
	var e EndpointStats
	for i := 0; e.Ejections == 0; i++ { // each new connection goes to either address: the sick one's second ejects it
		if i == 200 {
			t.Fatalf("no ejection after 200 requests, each on a new connection: %+v", c.Stats().Routes)
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.CloseIdleConnections()
		for _, x := range c.Stats().Routes[0].Endpoints {
			if x.Addr == srv.AddrPort(sick) {
				e = x
			}
		}
	}
	if e.Ejections != 1 || e.DialFailures != 0 || srv.Counts()[sick].Requests != 2 {
		t.Fatalf("the sick address's endpoint %+v after %d requests to it, want one ejection after 2", e, srv.Counts()[sick].Requests)
	}
}
