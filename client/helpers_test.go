package client

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
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

// connTracker counts a test server's connections as the server sees them, to
// prove limits from outside the client. A client that closes one connection and
// opens another is seen by the server in either order, so a count above the
// limit is only recorded if it persists for settle (a real excess does: pooled
// connections stay open).
type connTracker struct {
	mu            sync.Mutex
	open, total   int
	maxOpen       int
	limit         int
	settle        time.Duration
	parent        *connTracker // a tracker shared by several servers (the total)
	closed        chan struct{}
	remoteClosed  int
	longestSettle time.Duration  // longest wait for the server to see a replaced connection close
	checks        sync.WaitGroup // excess checks in flight
}

func newTracker(limit int, parent *connTracker) *connTracker {
	return &connTracker{limit: limit, settle: 500 * time.Millisecond, parent: parent, closed: make(chan struct{}, 1024)}
}

func (t *connTracker) connState(_ net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		t.opened()
		if t.parent != nil {
			t.parent.opened()
		}
	case http.StateClosed, http.StateHijacked:
		t.closedOne()
		if t.parent != nil {
			t.parent.closedOne()
		}
	}
}

// opened counts a new connection. It must not block: the server calls it from
// its accept loop, and a connection the client already closed is only seen
// closed once the loop has moved on. An excess is checked on a goroutine of its own.
func (t *connTracker) opened() {
	t.mu.Lock()
	t.open++
	t.total++
	o := t.open
	if o <= t.limit && o > t.maxOpen {
		t.maxOpen = o
	}
	t.mu.Unlock()
	if o <= t.limit {
		return
	}
	t.checks.Add(1)
	go func() { // owned by t.checks, waited for by snapshot
		defer t.checks.Done()
		start := time.Now()
		for {
			t.mu.Lock()
			o := t.open
			if o <= t.limit || time.Since(start) > t.settle {
				if o > t.maxOpen {
					t.maxOpen = o
				}
				if d := time.Since(start); d > t.longestSettle {
					t.longestSettle = d
				}
				t.mu.Unlock()
				return
			}
			t.mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
}

func (t *connTracker) closedOne() {
	t.mu.Lock()
	t.open--
	t.remoteClosed++
	t.mu.Unlock()
	select {
	case t.closed <- struct{}{}:
	default:
	}
}

func (t *connTracker) snapshot() (open, total, maxOpen int) {
	t.checks.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open, t.total, t.maxOpen
}

// waitOpen waits until the server sees exactly n open connections.
func (t *connTracker) waitOpen(tb testing.TB, n int) {
	tb.Helper()
	waitFor(tb, fmt.Sprintf("server to see %d open connections", n), func() bool {
		o, _, _ := t.snapshot()
		return o == n
	})
}

// newServer starts a test server whose connections are counted by t.
func newServer(tb testing.TB, t *connTracker, h http.Handler) *httptest.Server {
	tb.Helper()
	srv := httptest.NewUnstartedServer(h)
	if t != nil {
		srv.Config.ConnState = t.connState
	}
	srv.Start()
	tb.Cleanup(srv.Close)
	return srv
}

func newClient(tb testing.TB, cfg Config) *Client {
	tb.Helper()
	c, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

// waitFor polls cond until it holds, failing after 5s.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

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

func requestCtx(ctx context.Context, url string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	return req
}

// assertQuiet checks the pool holds no lease and no waiter.
func assertQuiet(tb testing.TB, c *Client) {
	tb.Helper()
	waitFor(tb, "0 leased and 0 pending", func() bool {
		st := c.Stats()
		return st.Leased == 0 && st.Pending == 0 && st.InFlight == 0
	})
}

var hello = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })

func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
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
	waitUntil(t, "no lease, stream or caller left", func() bool {
		st = c.Stats()
		return st.Leased == 0 && st.Pending == 0 && st.Streams == 0 && st.InFlight == 0
	})
	return st
}
