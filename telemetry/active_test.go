package telemetry

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// metricsTelemetry is telemetry with the meter SDK and no tracer.
func metricsTelemetry(t testing.TB) (*Telemetry, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	return New(Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: mp, Logger: discard}), reader
}

// activeByHost collects once and returns http.client.active_requests by
// server.address, checking that each point has the destination's attributes
// and the semantic conventions' unit, description and kind.
func activeByHost(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "http.client.active_requests" {
				continue
			}
			if m.Unit != "{request}" || m.Description != "Number of active HTTP requests." {
				t.Errorf("unit %q, description %q", m.Unit, m.Description)
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok || sum.IsMonotonic || sum.Temporality != metricdata.CumulativeTemporality {
				t.Fatalf("http.client.active_requests is %T (%+v), want a cumulative non-monotonic int64 sum", m.Data, m.Data)
			}
			for _, dp := range sum.DataPoints {
				host, _ := dp.Attributes.Value("server.address")
				port, _ := dp.Attributes.Value("server.port")
				scheme, _ := dp.Attributes.Value("url.scheme")
				if dp.Attributes.Len() != 3 || port.AsInt64() != 80 || scheme.AsString() != "http" {
					t.Errorf("point attributes %v", dp.Attributes.ToSlice())
				}
				if _, dup := got[host.AsString()]; dup {
					t.Errorf("two points for %s", host.AsString())
				}
				got[host.AsString()] = dp.Value
			}
		}
	}
	return got
}

func TestActiveRequestsReadExactlyTheRequestsInFlightFromConcurrentCallers(t *testing.T) {
	tel, reader := metricsTelemetry(t)
	const callers, each, held = 8, 200, 3 // each caller holds its last 3 requests open
	var wg sync.WaitGroup
	open := make([][]*Request, callers)
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				host := fmt.Sprintf("h%d.test", i%2)
				req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
				_, r := tel.StartRequest(context.Background(), req, "http", host, "80")
				if i >= each-held {
					open[c] = append(open[c], r)
					continue
				}
				r.Responded(&http.Response{StatusCode: 200, ProtoMajor: 1, ProtoMinor: 1})
				r.ExchangeDone()
			}
		})
	}
	// Collections run while the requests start and end: they must lose none.
	collectUntil(reader, wg.Wait)

	// The held requests are i = 197, 198, 199 of each caller: h1, h0, h1.
	got := activeByHost(t, reader)
	if got["h0.test"] != callers || got["h1.test"] != 2*callers {
		t.Fatalf("active requests %v, want h0.test %d and h1.test %d", got, callers, 2*callers)
	}
	for _, rs := range open {
		for _, r := range rs {
			r.Failed(context.Canceled)
		}
	}
	if got := activeByHost(t, reader); got["h0.test"] != 0 || got["h1.test"] != 0 || len(got) != 2 {
		t.Fatalf("active requests %v after every request ended, want 0 for both hosts", got)
	}
}

// collectUntil collects from reader again and again until wait returns.
func collectUntil(reader *sdkmetric.ManualReader, wait func()) {
	done := make(chan struct{})
	var collector sync.WaitGroup
	collector.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				var rm metricdata.ResourceMetrics
				reader.Collect(context.Background(), &rm)
			}
		}
	})
	wait()
	close(done)
	collector.Wait()
}

// A destination with nothing in flight and no request started is observed at
// 0 for activeGrace (every reader reads the 0), then dropped: a client that
// calls many hosts once each keeps none of them listed for longer.
func TestActiveRequestsDropDestinationsUnusedForTheGracePeriod(t *testing.T) {
	tel, reader := metricsTelemetry(t)
	clock := time.Unix(1000, 0)
	tel.activeList.now = func() time.Time { return clock }
	const hosts = 1000
	for i := range hosts {
		host := fmt.Sprintf("h%d.test", i)
		req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
		_, r := tel.StartRequest(context.Background(), req, "http", host, "80")
		r.Failed(context.Canceled)
	}
	// Used since the last collection; then found at 0 (a minute later), the
	// grace period's start; then at 0 until it is almost over.
	for _, step := range []time.Duration{0, time.Minute, activeGrace - 1} {
		clock = clock.Add(step)
		if got := activeByHost(t, reader); len(got) != hosts || got["h1.test"] != 0 {
			t.Fatalf("%d destinations observed (h1.test %d), want %d at 0", len(got), got["h1.test"], hosts)
		}
	}
	// One request keeps h7.test listed: it starts the grace period again.
	req, _ := http.NewRequest(http.MethodGet, "http://h7.test/", nil)
	_, r := tel.StartRequest(context.Background(), req, "http", "h7.test", "80")
	r.ExchangeDone()
	r.Responded(&http.Response{StatusCode: 204})
	clock = clock.Add(1)
	if got := activeByHost(t, reader); len(got) != hosts {
		t.Fatalf("%d destinations observed when the grace period ends, want %d (at 0, the last time)", len(got), hosts)
	}
	if got := activeByHost(t, reader); len(got) != 1 || got["h7.test"] != 0 {
		t.Fatalf("%d destinations observed after the grace period (h7.test %d), want only h7.test at 0", len(got), got["h7.test"])
	}
	if n := len(tel.activeList.routes); n != 1 {
		t.Fatalf("%d routes listed, want 1", n)
	}
	// The next request to a dropped destination lists it again.
	req, _ = http.NewRequest(http.MethodGet, "http://h8.test/", nil)
	_, r = tel.StartRequest(context.Background(), req, "http", "h8.test", "80")
	defer r.Failed(context.Canceled)
	if got := activeByHost(t, reader); len(got) != 2 || got["h8.test"] != 1 {
		t.Fatalf("active requests %v, want h8.test 1 and h7.test 0", got)
	}
}

// A Route forgotten while a request to it is in flight is still counted, and
// the one made again for its destination adds up with it in one point.
func TestActiveRequestsOfAForgottenRouteAddUpWithItsSuccessor(t *testing.T) {
	tel, reader := metricsTelemetry(t)
	req, _ := http.NewRequest(http.MethodGet, "http://h.test/", nil)
	_, first := tel.StartRequest(context.Background(), req, "http", "h.test", "80")
	old := tel.Route("http", "h.test", "80")
	old.Forget()
	_, second := tel.StartRequest(context.Background(), req, "http", "h.test", "80")
	if tel.Route("http", "h.test", "80") == old {
		t.Fatal("the forgotten Route was not replaced")
	}
	if got := activeByHost(t, reader); got["h.test"] != 2 {
		t.Fatalf("active requests %v, want h.test 2", got)
	}
	first.Failed(context.Canceled)
	second.Failed(context.Canceled)
	if got := activeByHost(t, reader); got["h.test"] != 0 {
		t.Fatalf("active requests %v, want h.test 0", got)
	}
}

func TestActiveRequestsAreNotCountedWithANoopMeterAndNotObservedAfterClose(t *testing.T) {
	noop := noopTelemetry()
	if noop.activeEnabled() {
		t.Fatal("requests counted with a no-op meter provider")
	}
	tel, reader := metricsTelemetry(t)
	req, _ := http.NewRequest(http.MethodGet, "http://h.test/", nil)
	_, r := tel.StartRequest(context.Background(), req, "http", "h.test", "80")
	defer r.Failed(context.Canceled)
	if got := activeByHost(t, reader); got["h.test"] != 1 {
		t.Fatalf("active requests %v, want h.test 1", got)
	}
	if err := tel.Close(); err != nil {
		t.Fatal(err)
	}
	if got := activeByHost(t, reader); len(got) != 0 {
		t.Fatalf("active requests %v observed after Close, want none", got)
	}
}

// When nothing collects (here a meter provider without readers), the list of
// Routes is pruned of those with nothing in flight as it grows: it stays
// within twice what is in flight, or activeMinPrune.
func TestActiveRequestsListStaysBoundedWhenNothingCollects(t *testing.T) {
	mp := sdkmetric.NewMeterProvider()
	defer mp.Shutdown(context.Background())
	tel := New(Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: mp, Logger: discard})
	defer tel.Close()
	start := func(host string) *Request {
		req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
		_, r := tel.StartRequest(context.Background(), req, "http", host, "80")
		if r == nil {
			t.Fatal("request not measured")
		}
		return r
	}
	held := start("held.test")
	most := 0
	for i := range 20 * activeMinPrune {
		start(fmt.Sprintf("h%d.test", i)).Failed(context.Canceled)
		most = max(most, len(tel.activeList.routes))
	}
	if most > activeMinPrune {
		t.Fatalf("the list reached %d routes, want at most %d", most, activeMinPrune)
	}
	kept := false
	for _, r := range tel.activeList.routes {
		kept = kept || r.address == "held.test"
	}
	if !kept || held.route.inFlight.n.Load() != 1 {
		t.Fatal("the route with a request in flight was pruned")
	}
	held.Failed(context.Canceled)
}

// Collections and prunes that drop Routes while requests start and end on
// them lose no request in flight: here every collection and every prune
// check finds the grace period over.
func TestActiveRequestsSurviveDropsRacingWithNewRequests(t *testing.T) {
	tel, reader := metricsTelemetry(t)
	var ticks atomic.Int64
	tel.activeList.now = func() time.Time { return time.Unix(0, ticks.Add(int64(activeGrace))) }
	const callers, each, hosts = 4, 3000, 1500
	var wg sync.WaitGroup
	held := make([]*Request, callers)
	for c := range callers {
		wg.Go(func() {
			for i := range each {
				host := fmt.Sprintf("h%d.test", (i*7+c)%hosts)
				req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
				_, r := tel.StartRequest(context.Background(), req, "http", host, "80")
				if i == each/2 {
					held[c] = r // one request per caller stays open
					continue
				}
				r.Failed(context.Canceled)
			}
		})
	}
	collectUntil(reader, wg.Wait)
	var sum int64
	for host, n := range activeByHost(t, reader) {
		if n != 0 && n != 1 {
			t.Errorf("%s: %d in flight", host, n)
		}
		sum += n
	}
	if sum != callers {
		t.Fatalf("%d requests in flight observed, want %d", sum, callers)
	}
	for _, r := range held {
		r.Failed(context.Canceled)
	}
}
