package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/goleak"

	"github.com/connactor/connactor/route"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discard = slog.New(slog.DiscardHandler)

func noopTelemetry() *Telemetry {
	return New(Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider(), Logger: discard})
}

func sdkTelemetry(t testing.TB) (*Telemetry, *tracetest.SpanRecorder, *sdkmetric.ManualReader) {
	sr := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { tp.Shutdown(context.Background()); mp.Shutdown(context.Background()) })
	return New(Config{TracerProvider: tp, MeterProvider: mp, Propagator: propagation.TraceContext{}, Logger: discard}), sr, reader
}

// A Route is kept until it is forgotten (its route reclaimed): then the next
// call makes a new one, and the forgotten one still records.
func TestAForgottenRouteIsMadeAgainOnItsNextUse(t *testing.T) {
	tel := noopTelemetry()
	a := tel.Route("http", "example.test", "80")
	if tel.Route("http", "example.test", "80") != a {
		t.Fatal("a second call made another Route")
	}
	a.Forget()
	b := tel.Route("http", "example.test", "80")
	if b == a {
		t.Fatal("the forgotten Route is still kept")
	}
	a.ConnOpened("http://example.test:80", 1, netip.AddrPort{}, time.Millisecond) // still usable
	a.Forget()                                                                    // not b's: b stays
	if tel.Route("http", "example.test", "80") != b {
		t.Fatal("forgetting a Route that was replaced dropped its replacement")
	}
	(*Route)(nil).Forget()
}

// A request that failed before a route actor took its destination (refused
// at admission) leaves no Route behind: a client refusing requests to ever
// new hosts keeps none per host. One whose destination a route actor
// measures keeps it.
func TestARequestRefusedBeforeItsRouteLeavesNoRoute(t *testing.T) {
	tel := tracingTelemetry(t)
	cached := func(host string) bool { _, ok := tel.routes.Load(routeID{"http", host, "80"}); return ok }
	for _, host := range []string{"refused.test", "routed.test"} {
		if host == "routed.test" {
			tel.ActorRoute("http", host, "80")
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
		_, r := tel.StartRequest(context.Background(), req, "http", host, "80")
		if !cached(host) {
			t.Fatalf("%s: no Route while its request runs", host)
		}
		r.Failed(errors.New("refused"))
	}
	if cached("refused.test") {
		t.Fatal("a request refused before any route actor took its destination left its Route")
	}
	if !cached("routed.test") {
		t.Fatal("a failed request dropped the Route a route actor measures with")
	}
}

// A route actor taking its Route while a request refused to the same
// destination forgets it keeps a Route that later requests find: one of
// the two wins, and the other leaves the cache to the winner.
func TestARouteTakenWhileARefusedRequestForgetsItStaysCached(t *testing.T) {
	tel := tracingTelemetry(t)
	req, _ := http.NewRequest(http.MethodGet, "http://race.test/", nil)
	for i := range 1000 {
		port := strconv.Itoa(i + 1)
		_, r := tel.StartRequest(context.Background(), req, "http", "race.test", port)
		var taken *Route
		var wg sync.WaitGroup
		wg.Go(func() { r.Failed(errors.New("refused")) })
		wg.Go(func() { taken = tel.ActorRoute("http", "race.test", port) })
		wg.Wait()
		if got := tel.Route("http", "race.test", port); got != taken {
			t.Fatalf("port %s: the route actor measures with a Route that later requests do not find", port)
		}
	}
}

// With http.client.active_requests on, requests refused to one host all
// count on the one Route its list holds (forgetting it at each refusal made
// a Route a refusal, each held by the list for activeGrace), and the
// collection that drops it, once it has been idle for activeGrace, forgets
// it.
func TestRefusedRequestsShareTheListedRouteUntilTheCollectionDropsIt(t *testing.T) {
	tel, _, reader := sdkTelemetry(t)
	now := time.Now()
	tel.activeList.now = func() time.Time { return now }
	req, _ := http.NewRequest(http.MethodGet, "http://hot.test/", nil)
	var first *Route
	for i := range 100 {
		_, r := tel.StartRequest(context.Background(), req, "http", "hot.test", "80")
		if i == 0 {
			first = r.route
		} else if r.route != first {
			t.Fatalf("refused request %d counted on a Route of its own", i)
		}
		r.Failed(errors.New("refused"))
	}
	cached := func() bool { _, ok := tel.routes.Load(routeID{"http", "hot.test", "80"}); return ok }
	var rm metricdata.ResourceMetrics
	for _, step := range []time.Duration{0, time.Second, activeGrace} {
		now = now.Add(step)
		if !cached() {
			t.Fatalf("the listed Route was forgotten before the collection dropped it (%v on)", step)
		}
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
	}
	if cached() {
		t.Fatal("the collection dropped the Route of refused requests and kept it cached")
	}
}

// tracingTelemetry records spans and no metrics: no active_requests list.
func tracingTelemetry(t testing.TB) *Telemetry {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return New(Config{TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), Logger: discard})
}

func TestNilTelemetryRouteAndRequestRecordNothing(t *testing.T) {
	var tel *Telemetry
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	out, r := tel.StartRequest(context.Background(), req, "http", "example.test", "80")
	if out != req || r != nil {
		t.Fatal("a nil Telemetry started a request")
	}
	r.LeaseGranted(LeaseInfo{QueuePos: 1})
	r.Retry(errors.New("x"))
	r.LeaseTimedOut(time.Second)
	r.Responded(&http.Response{StatusCode: 200})
	r.ExchangeDone()
	r.Failed(errors.New("x"))
	rt := tel.Route("http", "example.test", "80")
	if rt != nil {
		t.Fatal("a nil Telemetry made a Route")
	}
	rt.ConnOpened("r", 1, netip.AddrPort{}, time.Millisecond)
	rt.ConnClosed("r", 1, netip.AddrPort{}, "idle_expiry", time.Second, 1)
	rt.DialFailed("r", netip.AddrPort{}, errors.New("x"), time.Millisecond)
	rt.LeaseGranted(time.Millisecond)
	if err := tel.RegisterPool(nil, nil); err != nil || tel.Close() != nil {
		t.Fatal("nil Telemetry returned errors")
	}
}

func TestNoopProvidersCostNoAllocationPerRequest(t *testing.T) {
	tel := noopTelemetry()
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	ctx := context.Background()
	peer := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	allocs := testing.AllocsPerRun(100, func() {
		out, r := tel.StartRequest(ctx, req, "http", "example.test", "80")
		r.LeaseGranted(LeaseInfo{Reused: true, PeerAddr: peer})
		r.Responded(&http.Response{StatusCode: 200})
		r.ExchangeDone()
		if out != req || r != nil {
			t.Fatal("no-op telemetry started a request")
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per request with no-op providers, want 0", allocs)
	}
}

func TestStartRequestInjectsIntoACopyAndLeavesTheCallersRequestAlone(t *testing.T) {
	tel, sr, _ := sdkTelemetry(t)
	req, _ := http.NewRequest(http.MethodPost, "http://user:secret@example.test:8080/a?sig=abc&x=1", nil)
	req.Header.Set("X-Mine", "1")
	m, _ := baggage.NewMember("k", "v")
	bag, _ := baggage.New(m)
	ctx := baggage.ContextWithBaggage(context.Background(), bag)
	out, r := tel.StartRequest(ctx, req, "http", "example.test", "8080")
	if out == req {
		t.Fatal("headers were not injected into a copy")
	}
	if req.Header.Get("Traceparent") != "" || len(req.Header) != 1 {
		t.Fatalf("the caller's headers changed: %v", req.Header)
	}
	if out.Header.Get("Traceparent") == "" || out.Header.Get("X-Mine") != "1" {
		t.Fatalf("the copy's headers: %v", out.Header)
	}
	r.Failed(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	spans := sr.Ended()
	if len(spans) != 1 || spans[0].Name() != "POST" {
		t.Fatalf("spans: %v", spans)
	}
	for _, kv := range spans[0].Attributes() {
		if kv.Key == "url.full" && kv.Value.AsString() != "http://REDACTED:REDACTED@example.test:8080/a?sig=REDACTED&x=1" {
			t.Errorf("url.full = %q", kv.Value.AsString())
		}
		if kv.Key == "error.type" && kv.Value.AsString() != ErrorTypeConnRefused {
			t.Errorf("error.type = %q", kv.Value.AsString())
		}
	}
}

func TestMethodsOutsideTheStandardOnesAreReportedAsOther(t *testing.T) {
	for in, want := range map[string]string{"": "GET", "GET": "GET", "PATCH": "PATCH", "QUERY": "QUERY",
		"get": "_OTHER", "PURGE": "_OTHER"} {
		if got := normMethod(in); got != want {
			t.Errorf("normMethod(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestClientSpansCarryTheConnectionsPeerAddress(t *testing.T) {
	for _, c := range []struct {
		peer     net.Addr
		wantAddr string
		wantPort int64 // 0: no network.peer.port
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, "127.0.0.1", 8080},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 443}, "::1", 443},
		{&net.UnixAddr{Name: "/run/app.sock", Net: "unix"}, "/run/app.sock", 0},
		{nil, "", 0},
		{(*net.TCPAddr)(nil), "", 0},
	} {
		tel, sr, _ := sdkTelemetry(t)
		req, _ := http.NewRequest(http.MethodGet, "http://example.test:8080/", nil)
		_, r := tel.StartRequest(context.Background(), req, "http", "example.test", "8080")
		r.LeaseGranted(LeaseInfo{PeerAddr: c.peer})
		r.Responded(&http.Response{StatusCode: 200})
		r.ExchangeDone()
		spans := sr.Ended()
		if len(spans) != 1 {
			t.Fatalf("%v: %d spans", c.peer, len(spans))
		}
		var addr string
		var port int64
		for _, kv := range spans[0].Attributes() {
			switch kv.Key {
			case "network.peer.address":
				addr = kv.Value.AsString()
			case "network.peer.port":
				port = kv.Value.AsInt64()
			}
		}
		if addr != c.wantAddr || port != c.wantPort {
			t.Errorf("peer %v: network.peer.address %q, network.peer.port %d; want %q, %d",
				c.peer, addr, port, c.wantAddr, c.wantPort)
		}
	}
}

func TestInstrumentationScopeCarriesTheModuleVersion(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())
	tel := New(Config{TracerProvider: tp, MeterProvider: mp, Logger: discard, version: "v1.2.3"})
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	_, r := tel.StartRequest(context.Background(), req, "http", "example.test", "80")
	r.Failed(errors.New("boom"))
	if spans := sr.Ended(); len(spans) != 1 || spans[0].InstrumentationScope().Version != "v1.2.3" ||
		spans[0].InstrumentationScope().Name != ScopeName {
		t.Fatalf("span scope: %+v", spans[0].InstrumentationScope())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) == 0 || rm.ScopeMetrics[0].Scope.Version != "v1.2.3" {
		t.Fatalf("metric scopes: %+v", rm.ScopeMetrics)
	}
}

// Dial errors count by error.type and by the address dialed
// (network.peer.address and port; none for a dial by name).
func TestDialErrorsCountByErrorTypeAndPeer(t *testing.T) {
	tel, _, reader := sdkTelemetry(t)
	r := tel.Route("http", "example.test", "80")
	peer := netip.MustParseAddrPort("127.0.0.2:80")
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	r.DialFailed("http://example.test:80", peer, refused, time.Millisecond)
	r.DialFailed("http://example.test:80", peer, refused, time.Millisecond)
	r.DialFailed("http://example.test:80", netip.AddrPort{}, &net.DNSError{Err: "no such host", Name: "example.test"}, time.Millisecond)
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	got := int64Points(rm, func(name string, attrs attribute.Set) string {
		if name != MetricDialErrors {
			return ""
		}
		v, _ := attrs.Value("error.type")
		addr, _ := attrs.Value("network.peer.address")
		port, _ := attrs.Value("network.peer.port")
		return fmt.Sprintf("%s %s %d", v.AsString(), addr.AsString(), port.AsInt64())
	})
	if len(got) != 2 || got[ErrorTypeConnRefused+" 127.0.0.2 80"] != 2 || got[ErrorTypeDNS+"  0"] != 1 {
		t.Fatalf("dial errors by error.type and peer: %v", got)
	}
}

func TestPoolGaugesSumRoutesToTheSameDestination(t *testing.T) {
	tel, _, reader := sdkTelemetry(t)
	a := tel.Route("http", "example.test", "80")
	b := tel.Route("https", "example.test", "443")
	if tel.Route("http", "example.test", "80") != a {
		t.Fatal("Route is not cached")
	}
	readings := []RouteReading{
		{Route: a, Stats: route.Stats{Leased: 1, Idle: 2, Pending: 3}},
		{Route: a, Stats: route.Stats{Leased: 1, Idle: 0, Pending: 1}}, // another identity, same destination
		{Route: b, Stats: route.Stats{Leased: 5, Idle: 0, Pending: 0}},
	}
	registerReadings(t, tel, readings, 7)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := int64Points(rm, func(name string, attrs attribute.Set) string {
		port, _ := attrs.Value("server.port")
		state, _ := attrs.Value("http.connection.state")
		return fmt.Sprintf("%s %d %s", name, port.AsInt64(), state.AsString())
	})
	want := map[string]int64{
		"http.client.open_connections 80 active":  2,
		"http.client.open_connections 80 idle":    2,
		"http.client.open_connections 443 active": 5,
		"http.client.open_connections 443 idle":   0,
		MetricLeasePending + " 80 ":               4,
		MetricLeasePending + " 443 ":              0,
		MetricAdmitPending + " 0 ":                7,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
	if err := tel.Close(); err != nil {
		t.Fatal(err)
	}
	rm = metricdata.ResourceMetrics{}
	reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == MetricAdmitPending {
				t.Error("the pool gauges are still read after Close")
			}
		}
	}
}

// The endpoint gauge sums the routes to one destination (other identities)
// per address, with the address as network.peer.address and port.
func TestEndpointGaugeSumsEachAddressOverTheRoutesToADestination(t *testing.T) {
	tel, _, reader := sdkTelemetry(t)
	a := tel.Route("http", "example.test", "80")
	x, y := netip.MustParseAddrPort("127.0.0.2:80"), netip.MustParseAddrPort("127.0.0.3:80")
	readings := []RouteReading{
		{Route: a, Stats: route.Stats{Endpoints: []route.EndpointStats{{Addr: x, Open: 2}, {Addr: y, Open: 1}}}},
		{Route: a, Stats: route.Stats{Endpoints: []route.EndpointStats{{Addr: y, Open: 3}}}}, // another identity
		{Route: tel.Route("http", "other.test", "80")},                                       // no endpoints: no point
	}
	rm := collectReadings(t, tel, reader, readings)
	got := int64Points(rm, func(name string, attrs attribute.Set) string {
		if name != MetricEndpointOpen {
			return ""
		}
		host, _ := attrs.Value("server.address")
		addr, _ := attrs.Value("network.peer.address")
		port, _ := attrs.Value("network.peer.port")
		return fmt.Sprintf("%s %s:%d", host.AsString(), addr.AsString(), port.AsInt64())
	})
	want := map[string]int64{"example.test 127.0.0.2:80": 2, "example.test 127.0.0.3:80": 4}
	if len(got) != len(want) {
		t.Fatalf("endpoint gauge %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

// Connections opened and closed count by reason and by the address they went
// to (network.peer.address), beside the route's server.address; so do their
// durations.
func TestConnectionHooksCountByReasonAndPeer(t *testing.T) {
	tel, _, reader := sdkTelemetry(t)
	r := tel.Route("http", "example.test", "80")
	a, b := netip.MustParseAddrPort("127.0.0.2:80"), netip.MustParseAddrPort("127.0.0.3:80")
	r.ConnOpened("http://example.test:80", 1, a, time.Millisecond)
	r.ConnOpened("http://example.test:80", 2, b, time.Millisecond)
	r.ConnClosed("http://example.test:80", 1, a, "lru_eviction", time.Second, 3)
	r.ConnClosed("http://example.test:80", 2, b, "idle_expiry", time.Second, 1)
	r.ConnClosed("http://example.test:80", 3, b, "idle_expiry", time.Second, 1)
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	got := int64Points(rm, func(name string, attrs attribute.Set) string {
		reason, _ := attrs.Value(AttrCloseReason)
		peer, _ := attrs.Value("network.peer.address")
		host, _ := attrs.Value("server.address")
		return fmt.Sprintf("%s %s %s %s", name, host.AsString(), peer.AsString(), reason.AsString())
	})
	want := map[string]int64{
		MetricConnOpened + " example.test 127.0.0.2 ":             1,
		MetricConnOpened + " example.test 127.0.0.3 ":             1,
		MetricConnClosed + " example.test 127.0.0.2 lru_eviction": 1,
		MetricConnClosed + " example.test 127.0.0.3 idle_expiry":  2,
		"http.client.connection.duration example.test 127.0.0.3 ": 2,
		MetricDialDuration + " example.test 127.0.0.2 ":           1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
		}
	}
}

// benchRequest is one request's telemetry as the front door drives it.
func benchRequest(ctx context.Context, tel *Telemetry, req *http.Request, resp *http.Response) {
	_, r := tel.StartRequest(ctx, req, "http", "example.test", "80")
	r.LeaseGranted(LeaseInfo{Reused: true, IdleTime: time.Millisecond})
	r.Responded(resp)
	r.ExchangeDone()
}

// benchTelemetries runs bench with no-op providers (noop), with the meter SDK
// and no tracer (metrics: the span does not hide the metrics' cost), and with
// the SDK's tracer and meter (sdk).
func benchTelemetries(b *testing.B, bench func(b *testing.B, tel *Telemetry)) {
	b.Run("noop", func(b *testing.B) { bench(b, noopTelemetry()) })
	b.Run("metrics", func(b *testing.B) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer mp.Shutdown(context.Background())
		bench(b, New(Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: mp, Logger: discard}))
	})
	b.Run("sdk", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer tp.Shutdown(context.Background())
		defer mp.Shutdown(context.Background())
		bench(b, New(Config{TracerProvider: tp, MeterProvider: mp, Propagator: propagation.TraceContext{}, Logger: discard}))
	})
}

func BenchmarkRequestTelemetry(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/items", nil)
	resp := &http.Response{StatusCode: 200}
	benchTelemetries(b, func(b *testing.B, tel *Telemetry) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			benchRequest(ctx, tel, req, resp)
		}
	})
}

// BenchmarkRequestTelemetryParallel is BenchmarkRequestTelemetry from every
// core at once, all to one destination: what the writes a request shares with
// the others (the active requests' count, the duration histogram's point, the
// span processor) cost when they contend.
func BenchmarkRequestTelemetryParallel(b *testing.B) {
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/items", nil)
	resp := &http.Response{StatusCode: 200}
	benchTelemetries(b, func(b *testing.B, tel *Telemetry) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			ctx := context.Background()
			for pb.Next() {
				benchRequest(ctx, tel, req, resp)
			}
		})
	})
}

// int64Points returns the points of rm's int64 sums and gauges, and the
// record counts of its float64 histograms, each under key(the metric's name,
// the point's attributes); a point whose key is "" is left out.
func int64Points(rm metricdata.ResourceMetrics, key func(name string, attrs attribute.Set) string) map[string]int64 {
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			add := func(attrs attribute.Set, v int64) {
				if k := key(m.Name, attrs); k != "" {
					got[k] = v
				}
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, dp.Value)
				}
			case metricdata.Gauge[int64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, dp.Value)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					add(dp.Attributes, int64(dp.Count))
				}
			}
		}
	}
	return got
}

// registerReadings registers the pool gauges over readings, with admission
// requests queued.
func registerReadings(t *testing.T, tel *Telemetry, readings []RouteReading, admission int64) {
	t.Helper()
	if err := tel.RegisterPool(slices.Values(readings), func() int64 { return admission }); err != nil {
		t.Fatal(err)
	}
}

// collectReadings registers the pool gauges over readings, collects once and
// unregisters them.
func collectReadings(t *testing.T, tel *Telemetry, reader *sdkmetric.ManualReader, readings []RouteReading) metricdata.ResourceMetrics {
	t.Helper()
	registerReadings(t, tel, readings, 0)
	defer tel.Close()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}
