package client

// Where the package's tests are. A file's own behaviour is tested beside it:
// bridge_test.go, budget_test.go, client_test.go (New, Close, Shutdown,
// Clone), config_test.go, dispatch_test.go and dispatch_*_test.go (Send,
// Handle, SendAll, AbortAll), errors_test.go, fleet_test.go,
// identity_test.go, idle_test.go, logging_test.go, roundtrip_test.go,
// stats_test.go, status_test.go. What the pool does, seen through the client,
// is tested end to end in files named for the behaviour: limits, policies,
// reuse, failures, stale, desync, duplex, upgrade, expect_continue, gzip,
// trace, tls, proxy, telemetry, endpoints, http2 (and http2_*), routes (many
// routes, reclaimed), residue (what reclaimed routes leave, beside net/http).
//
// This file holds the helpers every test shares: the one way to make a client
// (newClient), the one way to wait for a state no event announces (waitFor),
// requests, loggers and the leak checks. The test servers that count
// connections are in servers_test.go, the raw-bytes server and its harness in
// harness_test.go, the in-memory network and testing/synctest bubbles in
// bubble_test.go.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// httptest servers' keep-alive connections end asynchronously after Close.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		// protoactor's dead-letter throttle: a one-shot timer goroutine that ends
		// by itself after DeadLetterThrottleInterval.
		goleak.IgnoreAnyFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
	)
}

// checkLeaks verifies, after the test and its cleanups (clients closed), that it
// left no goroutine behind: at once, where TestMain checks the whole package
// at its end.
func checkLeaks(t *testing.T) {
	ignore := []goleak.Option{goleak.IgnoreCurrent(),
		// protoactor's dead-letter log throttle: a timer goroutine that ends
		// after its period (1s).
		goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")}
	t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
}

// newClient starts a client for cfg that the test closes at its end (after
// the servers registered before it, since cleanups run last-in first-out).
// A nil Logger logs warnings and errors only (quietLogger).
func newClient(tb testing.TB, cfg Config) *Client {
	tb.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	c, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// waitFor waits for a state the test cannot be told about by an event (the
// pool's counts, what a server saw), polling cond; it fails the test after
// 10s.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// assertQuiet checks the pool holds no lease and no waiter.
func assertQuiet(tb testing.TB, c *Client) {
	tb.Helper()
	waitFor(tb, "0 leased and 0 pending", func() bool {
		st := c.Stats()
		return st.Leased == 0 && st.Pending == 0 && st.InFlight == 0
	})
}

// waitIdle waits until the pool holds n idle connections: a body's release
// reaches its route actor by message, after Close returns.
func waitIdle(tb testing.TB, c *Client, n int) {
	tb.Helper()
	waitFor(tb, fmt.Sprintf("%d idle connections", n), func() bool { return c.Stats().Idle == n })
}

// waitSettled waits until nothing is leased, pending or streaming, and
// returns the stats then.
func waitSettled(t *testing.T, c *Client) Stats {
	t.Helper()
	var st Stats
	waitFor(t, "no lease, stream or caller left", func() bool {
		st = c.Stats()
		return st.Leased == 0 && st.Pending == 0 && st.Streams == 0 && st.InFlight == 0
	})
	return st
}

// awaitCtx bounds a wait for a Handle's outcome (Handle.Await) to 10s.
func awaitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// get sends a GET through c and returns the body, failing the test on an error.
func get(tb testing.TB, c *Client, url string) string {
	tb.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		tb.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("GET %s: reading body: %v", url, err)
	}
	return string(b)
}

// getURL is a GET through the client.
func getURL(c *Client, u string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return c.RoundTrip(req)
}

func requestCtx(ctx context.Context, url string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	return req
}

func newGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// quietLogger logs warnings and errors only (protoactor logs every system start).
func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testLogger logs nothing, for tests whose warnings are expected and many.
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// syncBuffer is a log sink for tests that read what the client logged.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) count(sub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Count(s.b.String(), sub)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
