// Package globaltest checks how telemetry follows otel's global tracer and
// meter providers. It changes process-wide otel state, so it has a test binary of its own.
package globaltest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/connactor/connactor/telemetry"
)

func TestTelemetryFollowsTheGlobalTracerProviderInstalledLater(t *testing.T) {
	tel := telemetry.New(telemetry.Config{Propagator: propagation.TraceContext{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	// Nothing installed (true for the first run in this process only: the test
	// installs a provider below, and -count reruns it in the same process).
	if fmt.Sprintf("%T", otel.GetTracerProvider()) == "*global.tracerProvider" {
		checkNothingInstalled(t, tel)
	}

	// Installed after the client was made: spans are recorded from now on.
	rec := tracetest.NewSpanRecorder()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	req2, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	_, r2 := tel.StartRequest(context.Background(), req2, "http", "example.test", "80")
	if r2 == nil {
		t.Fatal("no span after a tracer provider was installed")
	}
	r2.Responded(&http.Response{StatusCode: 200, Body: http.NoBody})
	r2.ExchangeDone()
	if n := len(rec.Ended()); n != 1 {
		t.Fatalf("%d spans ended, want 1", n)
	}
}

// checkNothingInstalled: no span of ours, but the caller's trace context goes out.
func checkNothingInstalled(t *testing.T, tel *telemetry.Telemetry) {
	t.Helper()
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), parent)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://example.test/", nil)
	out, r := tel.StartRequest(ctx, req, "http", "example.test", "80")
	if r != nil {
		t.Fatal("a request was traced with no tracer provider installed")
	}
	if got := out.Header.Get("Traceparent"); got == "" || req.Header.Get("Traceparent") != "" {
		t.Fatalf("caller's trace context not propagated on a copy: out %q, caller's %q", got, req.Header.Get("Traceparent"))
	}
	plain, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	if allocs := testing.AllocsPerRun(100, func() {
		_, _ = tel.StartRequest(context.Background(), plain, "http", "example.test", "80")
	}); allocs != 0 {
		t.Errorf("StartRequest with nothing installed: %.0f allocations per request, want 0", allocs)
	}
}

var (
	installMeter sync.Once
	reader       = sdkmetric.NewManualReader() // the installed meter provider's
)

// Requests are counted in http.client.active_requests once a meter provider
// is installed, through the instrument made on the global placeholder before
// (it runs after the tracer's test: with nothing installed, a request costs
// no allocation, and counting it would).
// -count reruns it with the provider installed the first time.
func TestActiveRequestsFollowTheGlobalMeterProviderInstalledLater(t *testing.T) {
	tel := telemetry.New(telemetry.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer tel.Close()
	installMeter.Do(func() {
		otel.SetMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)))
	})
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	_, r := tel.StartRequest(context.Background(), req, "http", "example.test", "80")
	if r == nil {
		t.Fatal("a request was not measured after a meter provider was installed")
	}
	active := func() (n int64, points int) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "http.client.active_requests" {
					for _, dp := range sum.DataPoints {
						n += dp.Value
						points++
					}
				}
			}
		}
		return n, points
	}
	if n, points := active(); n != 1 || points != 1 {
		t.Fatalf("active requests %d in %d points, want 1 in 1", n, points)
	}
	r.Failed(context.Canceled)
	if n, points := active(); n != 0 || points != 1 {
		t.Fatalf("active requests %d in %d points after the request, want 0 in 1", n, points)
	}
}
