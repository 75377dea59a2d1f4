// Command otel runs connactor against local servers and exports its traces and
// metrics over OTLP/HTTP to the collector named by the standard
// OTEL_EXPORTER_OTLP_ENDPOINT (e.g. http://127.0.0.1:4318). Without it, it runs
// with telemetry off and says so.
//
// The workload shows what the telemetry explains: requests that wait for one of
// two connections (connactor.pool.wait span events, the lease wait histogram),
// connections evicted for another route under MaxConnsTotal and expired when
// idle (connactor.connection.closed by reason), and client spans nested under
// a span of the application's, their trace context propagated to the servers.
//
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 go run ./examples/otel
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/connactor/connactor/client"
)

// ServiceName is the service.name the example reports.
const ServiceName = "connactor-example-otel"

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "otel example:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer) error {
	tp, mp, flush, shutdown, err := providers(ctx, out)
	if err != nil {
		return err
	}

	// Two local servers: "slow" keeps its connections busy, "api" answers at once.
	var traced atomic.Int64 // requests that arrived with a traceparent header
	handler := func(delay time.Duration) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Traceparent") != "" {
				traced.Add(1)
			}
			time.Sleep(delay)
			io.WriteString(w, "ok\n")
		})
	}
	slow := httptest.NewServer(handler(20 * time.Millisecond))
	defer slow.Close()
	api := httptest.NewServer(handler(0))
	defer api.Close()
	auth := httptest.NewServer(handler(0))
	defer auth.Close()

	c, err := client.New(client.Config{
		MaxConnsPerRoute: 2,
		MaxConnsTotal:    3,
		MaxIdleTime:      150 * time.Millisecond,
		TracerProvider:   tp,
		MeterProvider:    mp,
		Propagator:       propagation.TraceContext{},
		Logger:           slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: c}
	var requests atomic.Int64
	get := func(ctx context.Context, u string) error {
		requests.Add(1)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}

	// One batch under an application span: 12 callers share the slow route's two
	// connections (they queue), 20 requests go to the api route.
	tracer := tp.Tracer("connactor-example")
	bctx, batch := tracer.Start(ctx, "example.batch")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() { // owned by run: waited by wg
			defer wg.Done()
			if err := get(bctx, slow.URL+"/report"); err != nil {
				errs <- err
			}
		}()
	}
	for i := 0; i < 20; i++ {
		if err := get(bctx, api.URL+"/items?page="+fmt.Sprint(i)); err != nil {
			errs <- err
		}
	}
	wg.Wait()
	batch.End()

	// All three places under MaxConnsTotal are taken by idle connections: the
	// auth route's connection evicts the least recently used of them. Then the
	// idle connections expire, and the next requests open new ones.
	if err := get(ctx, auth.URL+"/token"); err != nil {
		errs <- err
	}
	time.Sleep(400 * time.Millisecond)
	for _, u := range []string{api.URL, slow.URL, api.URL} {
		if err := get(ctx, u+"/again"); err != nil {
			errs <- err
		}
	}
	close(errs)
	var failed []error
	for err := range errs {
		failed = append(failed, err)
	}

	st := c.Stats()
	fmt.Fprintf(out, "requests: %d, failed: %d, with trace context at the server: %d\n", requests.Load(), len(failed), traced.Load())
	for _, r := range st.Routes {
		fmt.Fprintf(out, "route %s: opened %d, closed %v, leases %d (re-used %.0f%%), waits %d\n",
			r.Route, r.Opened, r.ClosedBy, r.Leases, 100*r.ReuseRatio(), len(r.RecentWaits))
	}
	// Export the metrics once more while the client is open: the pool gauges
	// (open connections, pending leases) are read only while it is.
	if err := flush(ctx); err != nil {
		return fmt.Errorf("exporting telemetry: %w", err)
	}
	if err := c.Close(); err != nil {
		return err
	}
	// Shutting the providers down exports what is left: the last spans and a
	// final collection of the metrics.
	if err := shutdown(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("exporting telemetry: %w", err)
	}
	return errors.Join(failed...)
}

// providers returns OTLP/HTTP-exporting tracer and meter providers when
// OTEL_EXPORTER_OTLP_ENDPOINT is set, no-ops otherwise.
func providers(ctx context.Context, out io.Writer) (tp trace.TracerProvider, mp metric.MeterProvider,
	flush, shutdown func(context.Context) error, err error) {
	endpoint := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	if endpoint == "" {
		fmt.Fprintln(out, "OTEL_EXPORTER_OTLP_ENDPOINT is not set: telemetry is off (set it to a collector's OTLP/HTTP address, e.g. http://127.0.0.1:4318)")
		none := func(context.Context) error { return nil }
		return tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider(), none, none, nil
	}
	// The exporters read OTEL_EXPORTER_OTLP_ENDPOINT (and the other standard
	// OTEL_EXPORTER_OTLP_* variables) themselves.
	spanExp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	metricExp, err := otlpmetrichttp.New(ctx)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	res := resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(ServiceName))
	stp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spanExp), sdktrace.WithResource(res))
	smp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metricExp, sdkmetric.WithInterval(time.Second))))
	fmt.Fprintf(out, "exporting traces and metrics over OTLP/HTTP to %s\n", endpoint)
	flush = func(ctx context.Context) error { return errors.Join(stp.ForceFlush(ctx), smp.ForceFlush(ctx)) }
	shutdown = func(ctx context.Context) error { return errors.Join(stp.Shutdown(ctx), smp.Shutdown(ctx)) }
	return stp, smp, flush, shutdown, nil
}
