package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/connactor/connactor/telemetry"
)

// observed is a client wired to an in-memory span recorder and a manual metric reader.
type observed struct {
	c      *Client
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
}

func newObserved(t *testing.T, cfg Config) *observed {
	t.Helper()
	o := &observed{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	cfg.TracerProvider, cfg.MeterProvider = tp, mp
	if cfg.Propagator == nil {
		cfg.Propagator = propagation.TraceContext{}
	}
	t.Cleanup(func() { // after the client's Close: cleanups run last-in first-out
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	o.c = newClient(t, cfg)
	return o
}

func (o *observed) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// sumOf returns the int64 sum (or gauge) value of metric name at the data point
// whose attributes include all of want.
func sumOf(ms map[string]metricdata.Metrics, name string, want ...attribute.KeyValue) int64 {
	m, ok := ms[name]
	if !ok {
		return 0
	}
	var total int64
	if s, ok := m.Data.(metricdata.Sum[int64]); ok {
		for _, dp := range s.DataPoints {
			if hasAll(dp.Attributes, want) {
				total += dp.Value
			}
		}
	}
	return total
}

func hasAll(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		v, ok := set.Value(kv.Key)
		if !ok || v != kv.Value {
			return false
		}
	}
	return true
}

func serverPort(t *testing.T, srv *httptest.Server) int {
	u, _ := url.Parse(srv.URL)
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func hasEvent(s sdktrace.ReadOnlySpan, name string) (sdktrace.Event, bool) {
	for _, e := range s.Events() {
		if e.Name == name {
			return e, true
		}
	}
	return sdktrace.Event{}, false
}

func TestThreeRequestsMakeThreeClientSpansWithHTTPSemanticConventions(t *testing.T) {
	checkLeaks(t)
	var mu sync.Mutex
	var traceparents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparents = append(traceparents, r.Header.Get("Traceparent"))
		mu.Unlock()
		io.WriteString(w, "hello")
	}))
	defer srv.Close()
	o := newObserved(t, Config{})

	for i := 0; i < 3; i++ {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/items?page=2", nil)
		resp, err := o.c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := req.Header.Get("Traceparent"); got != "" {
			t.Fatalf("the caller's request was modified: Traceparent %q", got)
		}
		if resp.Request != req {
			t.Fatal("resp.Request is not the caller's request")
		}
	}

	spans := o.spans.Ended()
	if len(spans) != 3 {
		t.Fatalf("%d spans ended, want 3", len(spans))
	}
	for i, s := range spans {
		if s.Name() != "GET" || s.SpanKind() != trace.SpanKindClient {
			t.Errorf("span %d: name %q kind %v, want GET client", i, s.Name(), s.SpanKind())
		}
		a := attrsOf(s)
		want := map[attribute.Key]attribute.Value{
			"http.request.method":       attribute.StringValue("GET"),
			"url.full":                  attribute.StringValue(srv.URL + "/items?page=2"),
			"server.address":            attribute.StringValue("127.0.0.1"),
			"server.port":               attribute.IntValue(serverPort(t, srv)),
			"network.protocol.version":  attribute.StringValue("1.1"),
			"http.response.status_code": attribute.IntValue(200),
		}
		for k, v := range want {
			if a[k] != v {
				t.Errorf("span %d: %s = %v, want %v", i, k, a[k].Emit(), v.Emit())
			}
		}
		if s.Status().Code != codes.Unset {
			t.Errorf("span %d: status %v, want unset", i, s.Status())
		}
		mu.Lock()
		tp := traceparents[i]
		mu.Unlock()
		if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; tp != want {
			t.Errorf("span %d: server saw traceparent %q, want %q", i, tp, want)
		}
	}
	if _, ok := hasEvent(spans[0], telemetry.EventDial); !ok {
		t.Errorf("the first request has no %s event: %v", telemetry.EventDial, spans[0].Events())
	}
	for _, s := range spans[1:] {
		if _, ok := hasEvent(s, telemetry.EventReused); !ok {
			t.Errorf("a later request has no %s event: %v", telemetry.EventReused, s.Events())
		}
	}

	ms := o.collect(t)
	h, ok := ms["http.client.request.duration"].Data.(metricdata.Histogram[float64])
	if !ok || len(h.DataPoints) != 1 || h.DataPoints[0].Count != 3 {
		t.Fatalf("http.client.request.duration: %+v", ms["http.client.request.duration"].Data)
	}
	if got := sumOf(ms, telemetry.MetricConnOpened); got != 1 {
		t.Errorf("%s = %d, want 1", telemetry.MetricConnOpened, got)
	}
}

func TestTransportFailureEndsTheSpanWithAnErrorStatus(t *testing.T) {
	checkLeaks(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: the dial is refused
	o := newObserved(t, Config{})
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	if _, err := o.c.RoundTrip(req); err == nil {
		t.Fatal("request to a closed port succeeded")
	}
	spans := o.spans.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	if spans[0].Status().Code != codes.Error {
		t.Errorf("status %v, want error", spans[0].Status())
	}
	if a := attrsOf(spans[0]); a["error.type"].AsString() == "" {
		t.Errorf("no error.type: %v", spans[0].Attributes())
	}
	if got := sumOf(o.collect(t), telemetry.MetricDialErrors); got != 1 {
		t.Errorf("%s = %d, want 1", telemetry.MetricDialErrors, got)
	}
}

func TestOpenConnectionsMoveBetweenActiveAndIdleAsBodiesAreReadAndClosed(t *testing.T) {
	checkLeaks(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "some body")
	}))
	defer srv.Close()
	o := newObserved(t, Config{})
	active := attribute.String("http.connection.state", "active")
	idle := attribute.String("http.connection.state", "idle")
	port := attribute.Int("server.port", serverPort(t, srv))
	states := func() (int64, int64) {
		ms := o.collect(t)
		return sumOf(ms, "http.client.open_connections", active, port), sumOf(ms, "http.client.open_connections", idle, port)
	}

	for round, finish := range []func(*http.Response){
		func(r *http.Response) { io.ReadAll(r.Body) }, // EOF releases
		func(r *http.Response) { r.Body.Close() },     // Close drains and releases
	} {
		resp, err := getURL(o.c, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		// The route publishes its counts just after it answers the lease.
		waitFor(t, "the connection to turn active", func() bool { a, i := states(); return a == 1 && i == 0 })
		if got := sumOf(o.collect(t), "http.client.active_requests"); got != 1 {
			t.Fatalf("round %d: active_requests %d while the body is unread, want 1", round, got)
		}
		finish(resp)
		resp.Body.Close()
		waitFor(t, "the connection to turn idle", func() bool { a, i := states(); return a == 0 && i == 1 })
		if got := sumOf(o.collect(t), "http.client.active_requests"); got != 0 {
			t.Fatalf("round %d: active_requests %d after the body ended, want 0", round, got)
		}
	}
}

// The wait is measured on the fake clock of a testing/synctest bubble, over
// the in-memory network: it is the hold exactly, and takes no real time.
func TestALeaseWaitShowsInTheWaitHistogramWithTheRightMagnitude(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		checkLeaks(t)
		srv, mem := newMemHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "x")
		}))
		o := newObserved(t, Config{MaxConnsPerRoute: 1, DialContext: mem.dial})

		first, err := getURL(o.c, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { // owned by this test: it waits on done
			resp, err := getURL(o.c, srv.URL)
			if err == nil {
				io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			done <- err
		}()
		waitFor(t, "the second request to queue", func() bool {
			return sumOf(o.collect(t), telemetry.MetricLeasePending) == 1
		})
		const hold = 100 * time.Millisecond // the wait being measured
		time.Sleep(hold)
		io.ReadAll(first.Body)
		first.Body.Close()
		if err := <-done; err != nil {
			t.Fatal(err)
		}

		h, ok := o.collect(t)[telemetry.MetricLeaseWait].Data.(metricdata.Histogram[float64])
		if !ok || len(h.DataPoints) != 1 {
			t.Fatalf("no %s histogram", telemetry.MetricLeaseWait)
		}
		dp := h.DataPoints[0]
		max, _ := dp.Max.Value()
		if dp.Count != 2 || max < hold.Seconds() || max >= 1 {
			t.Fatalf("lease waits: count %d max %.3fs, want 2 leases, the longest in [%.1fs, 1s)", dp.Count, max, hold.Seconds())
		}
		// The first request queued too, briefly, while its connection was dialed.
		var longest float64
		for _, s := range o.spans.Ended() {
			e, ok := hasEvent(s, telemetry.EventPoolWait)
			if !ok {
				continue
			}
			var pos int64
			var wait float64
			for _, kv := range e.Attributes {
				switch kv.Key {
				case telemetry.AttrQueuePos:
					pos = kv.Value.AsInt64()
				case telemetry.AttrWait:
					wait = kv.Value.AsFloat64()
				}
			}
			if pos != 1 {
				t.Errorf("queue position %d, want 1", pos)
			}
			longest = math.Max(longest, wait)
		}
		if longest < hold.Seconds() || longest >= 1 {
			t.Errorf("longest pool wait event %.3fs, want in [%.1fs, 1s)", longest, hold.Seconds())
		}
		st := o.c.Stats()
		if len(st.Routes) != 1 || len(st.Routes[0].RecentWaits) != 2 || st.Routes[0].RecentWaits[0].Waited < hold {
			t.Fatalf("Stats' recent waits: %+v", st.Routes)
		}
	})
}

func TestAnLRUEvictionAndAnIdleExpiryAreCountedWithTheirReasons(t *testing.T) {
	checkLeaks(t)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") })
	a := httptest.NewServer(handler)
	defer a.Close()
	b := httptest.NewServer(handler)
	defer b.Close()
	get := func(c *Client, u string) {
		resp, err := getURL(c, u)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	reason := func(r string) attribute.KeyValue { return telemetry.AttrCloseReason.String(r) }

	t.Run("lru", func(t *testing.T) {
		o := newObserved(t, Config{MaxConnsTotal: 1, MaxConnsPerRoute: 1})
		get(o.c, a.URL)
		waitFor(t, "a's connection to turn idle", func() bool { return o.c.Stats().Idle == 1 })
		get(o.c, b.URL) // room for b's connection: a's idle one is evicted
		aPort := attribute.Int("server.port", serverPort(t, a))
		waitFor(t, "the eviction to be counted", func() bool {
			return sumOf(o.collect(t), telemetry.MetricConnClosed, reason("lru_eviction"), aPort) == 1
		})
		if st := o.c.Stats(); st.Evictions != 1 {
			t.Errorf("Stats().Evictions = %d, want 1", st.Evictions)
		}
	})
	t.Run("idle expiry", func(t *testing.T) {
		o := newObserved(t, Config{MaxIdleTime: 30 * time.Millisecond})
		get(o.c, a.URL)
		waitFor(t, "the idle expiry to be counted", func() bool {
			return sumOf(o.collect(t), telemetry.MetricConnClosed, reason("idle_expiry")) == 1
		})
		// The route, unused since, reclaims itself on the same tick.
		waitFor(t, "the route reclaimed", func() bool { return o.c.Stats().RoutesReclaimed == 1 })
		if st := o.c.Stats(); st.Expired != 1 || len(st.Routes) != 0 {
			t.Fatalf("Stats: %d expired, routes %+v; want 1 expired, the route reclaimed", st.Expired, st.Routes)
		}
		h, ok := o.collect(t)["http.client.connection.duration"].Data.(metricdata.Histogram[float64])
		if !ok || len(h.DataPoints) != 1 || h.DataPoints[0].Count != 1 {
			t.Fatalf("http.client.connection.duration: %+v", h)
		}
	})
}

// brokenPipeConn fails the write of its second request without writing a byte,
// as a connection the server closed while idle does.
type brokenPipeConn struct {
	net.Conn
	writes atomic.Int32
}

func (c *brokenPipeConn) Write(p []byte) (int, error) {
	if c.writes.Add(1) == 2 { // a request is flushed in one write
		return 0, errors.New("injected broken pipe")
	}
	return c.Conn.Write(p)
}

func TestARetryAndALeaseTimeoutAreCounted(t *testing.T) {
	checkLeaks(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") }))
	defer srv.Close()
	var dials atomic.Int32
	o := newObserved(t, Config{MaxConnsPerRoute: 1, LeaseTimeout: 50 * time.Millisecond,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err != nil || dials.Add(1) > 1 {
				return nc, err
			}
			return &brokenPipeConn{Conn: nc}, nil
		}})
	for i := 0; i < 2; i++ {
		resp, err := getURL(o.c, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	held, err := getURL(o.c, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := getURL(o.c, srv.URL); !errors.Is(err, ErrLeaseTimeout) {
		t.Fatalf("err = %v, want ErrLeaseTimeout", err)
	}
	held.Body.Close()

	ms := o.collect(t)
	if got := sumOf(ms, telemetry.MetricRequestRetries); got != 1 {
		t.Errorf("%s = %d, want 1; dials %d, stats %+v", telemetry.MetricRequestRetries, got, dials.Load(), o.c.Stats())
	}
	if got := sumOf(ms, telemetry.MetricLeaseTimeouts); got != 1 {
		t.Errorf("%s = %d, want 1", telemetry.MetricLeaseTimeouts, got)
	}
	var retried, timedOut bool
	for _, s := range o.spans.Ended() {
		if _, ok := hasEvent(s, telemetry.EventRetry); ok && attrsOf(s)["http.request.resend_count"].AsInt64() == 1 {
			retried = true
		}
		if attrsOf(s)["error.type"].AsString() == "lease_timeout" && s.Status().Code == codes.Error {
			timedOut = true
		}
	}
	if !retried || !timedOut {
		t.Errorf("spans: retried %v, lease timeout %v; want both", retried, timedOut)
	}
}

// BenchmarkRoundTripTelemetry measures what telemetry costs per request: "off"
// with no-op providers, "on" with the SDK (a batching tracer provider exporting
// nowhere, a meter provider with a manual reader, W3C trace context injected).
func BenchmarkRoundTripTelemetry(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	run := func(b *testing.B, cfg Config) {
		cfg.Logger = slog.New(slog.DiscardHandler)
		c := newClient(b, cfg)
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			resp, err := c.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	b.Run("off", func(b *testing.B) {
		run(b, Config{TracerProvider: tracenoop.NewTracerProvider(), MeterProvider: metricnoop.NewMeterProvider()})
	})
	b.Run("on", func(b *testing.B) {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		defer tp.Shutdown(context.Background())
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		defer mp.Shutdown(context.Background())
		run(b, Config{TracerProvider: tp, MeterProvider: mp, Propagator: propagation.TraceContext{}})
	})
}

func TestAnHTTPSRequestHasDialAndTLSHandshakeEvents(t *testing.T) {
	checkLeaks(t)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") }))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	o := newObserved(t, Config{TLSConfig: &tls.Config{RootCAs: roots}})
	resp, err := getURL(o.c, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	resp.Body.Close()
	spans := o.spans.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	for _, name := range []string{telemetry.EventDial, telemetry.EventTLS} {
		e, ok := hasEvent(spans[0], name)
		if !ok {
			t.Fatalf("no %s event: %v", name, spans[0].Events())
		}
		for _, kv := range e.Attributes {
			if kv.Value.AsFloat64() <= 0 {
				t.Errorf("%s: %s = %v, want > 0", name, kv.Key, kv.Value.AsFloat64())
			}
		}
	}
	if a := attrsOf(spans[0]); a["url.full"].AsString() != srv.URL || a["http.response.status_code"].AsInt64() != 200 {
		t.Errorf("attributes: %v", spans[0].Attributes())
	}
}
