package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/connactor/connactor/client"
)

// The main path: a Client is an http.RoundTripper. Put it in an http.Client
// and keep redirects, cookies and timeouts; read or close every body, which
// returns its connection to the pool.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+r.URL.Path)
	}))
	defer srv.Close()

	c, err := client.New(client.Config{
		MaxConnsPerRoute: 8,               // per scheme+host+port(+proxy, identity)
		MaxConnsTotal:    64,              // across all routes
		LeaseTimeout:     2 * time.Second, // longest wait for a connection
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	hc := &http.Client{Transport: c, Timeout: 10 * time.Second}

	for _, path := range []string{"/a", "/b"} {
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			fmt.Println("error:", err) // transport failures only; 4xx and 5xx are responses
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(b))
	}
	st := c.Stats()
	fmt.Printf("connections opened %d, idle %d\n", st.Routes[0].Opened, st.Idle)
	// Output:
	// 200 hello from /a
	// 200 hello from /b
	// connections opened 1, idle 1
}

// fetcher is an actor of the embedding service that asks the client for a
// URL and handles the answer as a message: its mailbox is never blocked while
// the request is in flight.
type fetcher struct {
	c    *client.Client
	url  string
	done chan string
}

func (f *fetcher) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		req, _ := http.NewRequest(http.MethodGet, f.url, nil)
		ctx.Request(f.c.PID(), &client.Request{HTTP: req, Tag: "first"})
	case *client.Response:
		if m.Err != nil {
			f.done <- "error: " + m.Err.Error()
			return
		}
		b, _ := io.ReadAll(m.HTTP.Body)
		m.HTTP.Body.Close() // releases the connection
		f.done <- fmt.Sprintf("%v: %d %s", m.Tag, m.HTTP.StatusCode, b)
	}
}

// The actor path: the client shares the service's actor system
// (Config.System), which logs through slog with ProtoactorLogger. Shut down
// in this order: your actors, then the client (Close, or Shutdown to let
// requests finish), then the actor system.
func Example_actors() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "pong")
	}))
	defer srv.Close()

	logger := slog.New(slog.DiscardHandler)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(client.ProtoactorLogger(logger)))
	c, err := client.New(client.Config{System: sys, Logger: logger})
	if err != nil {
		panic(err)
	}

	f := &fetcher{c: c, url: srv.URL, done: make(chan string, 1)}
	pid := sys.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return f }))
	fmt.Println(<-f.done)

	sys.Root.StopFuture(pid).Wait()  // 1. the actors that use the client
	c.Shutdown(context.Background()) // 2. the client: requests in flight finish
	sys.Shutdown()                   // 3. the actor system
	// Output:
	// first: 200 pong
}

// Stats prints as a short table, so fmt.Println(c.Stats()) or a log line shows
// the pool at a glance: the totals, then a row per route. The struct's fields
// are there for code.
func ExampleStats() {
	st := client.Stats{Open: 3, Leased: 2, Idle: 1, Pending: 4, Connections: 3, MaxConnsTotal: 64, InFlight: 6,
		Routes: []client.RouteStats{
			{Route: "http://127.0.0.1:8080", Open: 2, Leased: 2, Pending: 4, Max: 2, Leases: 40, Reuses: 30,
				FailFast: "closed", OldestLease: 1500 * time.Millisecond},
			{Route: "https://api.example:443 as alice", Open: 1, Idle: 1, Max: 8, Leases: 1, FailFast: "closed"},
		}}
	fmt.Print(st)
	// Output:
	// connactor: 3 open (2 leased, 1 idle), 4 pending, 0 streams; 3/64 connections, 6 in flight, 0 waiting for admission
	// route                             open  leased  idle  dialing  pending  max  streams  reuse  fail-fast  oldest lease
	// http://127.0.0.1:8080             2     2       0     0        4        2    0        75%    closed     1.5s
	// https://api.example:443 as alice  1     0       1     0        0        8    0        0%     closed     0s
}

// StatusHandler serves a live status page of the pool, and its JSON.
func ExampleStatusHandler() {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer backend.Close()
	c, err := client.New(client.Config{MaxConnsPerRoute: 4})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	resp, err := c.RoundTrip(httptest.NewRequest(http.MethodGet, backend.URL, nil).WithContext(context.Background()))
	if err != nil {
		panic(err)
	}
	resp.Body.Close()

	mux := http.NewServeMux()
	mux.Handle("/debug/connactor/", client.StatusHandler(c)) // serve it on an internal address
	status := httptest.NewServer(mux)
	defer status.Close()

	page, _ := http.Get(status.URL + "/debug/connactor/?format=json")
	b, _ := io.ReadAll(page.Body)
	page.Body.Close()
	fmt.Println(page.Header.Get("Content-Type"), strings.Contains(string(b), `"maxConnsPerRoute": 4`))
	// Output:
	// application/json true
}

// OpenTelemetry: each request gets a client span, and the propagator writes
// its trace context into the request's headers (on a copy: the caller's
// request is left alone).
func Example_openTelemetry() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println("server got a traceparent:", r.Header.Get("Traceparent") != "")
	}))
	defer srv.Close()

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())
	c, err := client.New(client.Config{
		TracerProvider: tp,
		Propagator:     propagation.TraceContext{}, // nil = otel.GetTextMapPropagator()
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()

	resp, err := (&http.Client{Transport: c}).Get(srv.URL)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for _, s := range spans.Ended() {
		fmt.Println("span:", s.Name(), s.SpanKind())
	}
	// Output:
	// server got a traceparent: true
	// span: GET client
}
