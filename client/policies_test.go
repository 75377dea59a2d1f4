package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dialCounter wraps net.Dialer: it counts dials, the dials in flight and
// their peak, and can make dials fail or wait.
type dialCounter struct {
	d                     net.Dialer
	dials, inFlight, peak atomic.Int64
	fail                  atomic.Bool
	gate                  chan struct{} // when set, each dial waits for a value
	open, maxOpen, opened atomic.Int64  // sockets the client holds
}

func (dc *dialCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	dc.dials.Add(1)
	raisePeak(&dc.peak, dc.inFlight.Add(1))
	defer dc.inFlight.Add(-1)
	if dc.gate != nil {
		select {
		case <-dc.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if dc.fail.Load() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused (test)")}
	}
	c, err := dc.d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	raisePeak(&dc.maxOpen, dc.open.Add(1))
	dc.opened.Add(1)
	return &countedClose{Conn: c, open: &dc.open}, nil
}

// raisePeak raises peak to n if n is higher, for a reading that other
// goroutines raise at the same time.
func raisePeak(peak *atomic.Int64, n int64) {
	for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
	}
}

// countedClose is a socket counted in open, which its first Close lowers.
type countedClose struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedClose) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

// A full wait queue fails the next caller at once with ErrQueueFull (also
// ErrNotSent); the server never sees more than the route's connections, and
// other routes are not affected.
func TestMaxPendingPerRouteRefusesTheNextCallerAtOnce(t *testing.T) {
	release := make(chan struct{})
	busy := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { <-release; io.WriteString(w, "busy") })
	other := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "other") })
	c := newClient(t, Config{MaxConnsPerRoute: 1, MaxPendingPerRoute: 5})
	results := make(chan error, 50)
	call := func() {
		resp, err := c.RoundTrip(newGet(t, busy.URL))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		results <- err
	}
	go call() // holds the route's one connection
	waitFor(t, "the connection leased", func() bool { return c.Stats().Leased == 1 })
	for i := 0; i < 49; i++ {
		go call()
	}
	refused := 0
	for refused < 44 {
		err := <-results
		if !errors.Is(err, ErrQueueFull) || !errors.Is(err, ErrNotSent) {
			t.Fatalf("refused caller got %v", err)
		}
		refused++
	}
	if got := get(t, c, other.URL); got != "other" {
		t.Fatalf("another route: %q", got)
	}
	close(release)
	for i := 0; i < 6; i++ {
		if err := <-results; err != nil {
			t.Fatalf("queued caller: %v", err)
		}
	}
	if n := busy.newConns.Load(); n != 1 {
		t.Fatalf("the server saw %d connections", n)
	}
	st := c.Stats()
	var busyStats RouteStats
	for _, r := range st.Routes {
		if strings.Contains(busy.URL, strings.TrimPrefix(r.Route, "http://")) {
			busyStats = r
		}
	}
	if busyStats.QueueFull != 44 {
		t.Fatalf("QueueFull %d, want 44: %+v", busyStats.QueueFull, st)
	}
	if busy.count("/") != 6 {
		t.Fatalf("server handled %d requests, want 6", busy.count("/"))
	}
}

// MaxDialsPerRoute bounds the dials in flight: waiters beyond it wait for a
// dial or a release and start no dial of their own.
func TestMaxDialsPerRouteBoundsDialsInFlight(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	dc := &dialCounter{gate: make(chan struct{})}
	c := newClient(t, Config{MaxConnsPerRoute: 10, MaxDialsPerRoute: 2, DialContext: dc.dial})
	var wg sync.WaitGroup
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			get(t, c, srv.URL)
		}()
	}
	waitFor(t, "two dials in flight", func() bool { return dc.inFlight.Load() == 2 })
	waitFor(t, "the callers queued", func() bool { return c.Stats().Pending == 10 })
	if n := dc.dials.Load(); n != 2 {
		t.Fatalf("%d dials started with MaxDialsPerRoute 2", n)
	}
	served := make(chan struct{})
	go func() { // owned by this test: ends when the callers have their answers
		wg.Wait()
		close(served)
	}()
release:
	for i := 0; i < 10; i++ {
		select {
		case dc.gate <- struct{}{}:
		case <-served: // no more dials wanted: connections served the rest
			break release
		}
		if dc.peak.Load() > 2 {
			t.Fatalf("%d dials in flight", dc.peak.Load())
		}
	}
	<-served
	if p := dc.peak.Load(); p != 2 {
		t.Fatalf("peak dials in flight %d", p)
	}
}

// A route whose dials keep failing fails fast (well under a millisecond a
// call, no dial), lets one probe out after its cool-down, and recovers.
func TestARouteFailsFastThenRecoversAfterAProbe(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up") })
	dc := &dialCounter{}
	dc.fail.Store(true)
	var logs syncBuffer
	c := newClient(t, Config{FailFastAfter: 3, FailFastCooldown: 300 * time.Millisecond,
		DialContext: dc.dial, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	for i := 0; i < 3; i++ {
		if _, err := c.RoundTrip(newGet(t, srv.URL)); err == nil || !errors.Is(err, ErrNotSent) {
			t.Fatalf("dial %d: %v", i, err)
		}
	}
	dials := dc.dials.Load()
	var took []time.Duration
	for i := 0; i < 101; i++ {
		start := time.Now()
		_, err := c.RoundTrip(newGet(t, srv.URL))
		took = append(took, time.Since(start))
		if !errors.Is(err, ErrRouteUnavailable) || !errors.Is(err, ErrNotSent) {
			t.Fatalf("fail-fast call %d: %v", i, err)
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	t.Logf("fail-fast calls: median %v, max %v", took[50], took[100])
	if took[50] >= time.Millisecond {
		t.Fatalf("fail-fast median %v, want under 1ms", took[50])
	}
	if dc.dials.Load() != dials {
		t.Fatal("a route failing fast dialled")
	}
	st := c.Stats()
	// FailedFast: the 101, and the caller whose failed dial opened it.
	if st.Routes[0].FailFast != "open" || st.Routes[0].FailedFast != 102 || st.Routes[0].FailFastUntil.IsZero() {
		t.Fatalf("stats while failing fast: %+v", st.Routes[0])
	}
	if body := c.Status(); body.Routes[0].FailFast != "open" {
		t.Fatalf("status page: %+v", body.Routes[0])
	}
	dc.fail.Store(false)
	waitFor(t, "the cool-down to pass", func() bool {
		resp, err := c.RoundTrip(newGet(t, srv.URL))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	if n := dc.dials.Load() - dials; n != 1 {
		t.Fatalf("%d dials after the cool-down, want one probe", n)
	}
	if c.Stats().Routes[0].FailFast != "closed" {
		t.Fatal("not recovered")
	}
	if n := logs.count("route fails fast"); n != 1 {
		t.Fatalf("%d fail-fast warnings, want one per state change:\n%s", n, logs.String())
	}
	if n := logs.count("succeed again"); n != 1 {
		t.Fatalf("%d recovery logs, want one", n)
	}
}

// MaxRequestsPerConn retires a connection after its Nth request: the server
// sees ceil(10/3) connections for 10 sequential requests.
func TestMaxRequestsPerConnRotatesConnections(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c := newClient(t, Config{MaxRequestsPerConn: 3})
	for i := 0; i < 10; i++ {
		get(t, c, srv.URL)
	}
	if n := srv.newConns.Load(); n != 4 {
		t.Fatalf("server saw %d connections for 10 requests at 3 per connection", n)
	}
	waitFor(t, "three retirements", func() bool { return c.Stats().Routes[0].ClosedBy["max_requests"] == 3 })
}

// A server that closes idle connections after 200 ms, without saying so:
// after a warm-up the route knows, and requests 250 ms apart never meet a
// stale connection. The server's deadlines and the test's waits run on the
// fake clock of a testing/synctest bubble, over the in-memory network.
func TestARouteLearnsTheServersIdleTimeout(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		srv := newMemServer(func(c *rawConn) {
			for {
				c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
				if _, _, err := c.readRequest(); err != nil {
					return // idle 200ms: close
				}
				c.SetReadDeadline(time.Time{})
				c.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
		})
		t.Cleanup(srv.Close)
		c := newClient(t, Config{DialContext: srv.mem.dial})
		get(t, c, srv.URL())
		waitFor(t, "the server's idle timeout learned", func() bool { return c.Stats().Routes[0].LearnedIdle > 0 })
		learned := c.Stats().Routes[0].LearnedIdle
		if learned < 150*time.Millisecond || learned > 400*time.Millisecond {
			t.Fatalf("learned %v for a 200ms timeout", learned)
		}
		before := c.Stats()
		for i := 0; i < 6; i++ {
			time.Sleep(250 * time.Millisecond)
			if got := get(t, c, srv.URL()); got != "ok" {
				t.Fatalf("request %d: %q", i, got)
			}
		}
		after := c.Stats()
		if after.Retries != before.Retries || after.RetriesRefused != before.RetriesRefused {
			t.Fatalf("stale connections met: retries %d -> %d", before.Retries, after.Retries)
		}
		if c.Status().Routes[0].LearnedIdle == 0 {
			t.Fatal("the status page does not show the learned idle timeout")
		}
	})
}

// MaxConnsPerHost holds across the routes of one host (three identities), at
// the server, and the routes waiting for the host are served in arrival order.
func TestMaxConnsPerHostHoldsAcrossIdentitiesInArrivalOrder(t *testing.T) {
	tracker := newTracker(1, nil)
	release := make(chan struct{})
	var mu sync.Mutex
	var served []string
	srv := newServer(t, tracker, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-release
		}
		mu.Lock()
		served = append(served, r.URL.Path)
		mu.Unlock()
		io.WriteString(w, r.URL.Path)
	}))
	c := newClient(t, Config{MaxConnsPerRoute: 2, MaxConnsPerHost: 1})
	as := func(id, path string) *http.Request {
		req, _ := http.NewRequestWithContext(WithIdentity(context.Background(), id), http.MethodGet, srv.URL+path, nil)
		return req
	}
	done := make(chan error, 3)
	call := func(id, path string) {
		resp, err := c.RoundTrip(as(id, path))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		done <- err
	}
	go call("alice", "/hold")
	tracker.waitOpen(t, 1)
	go call("bob", "/bob")
	waitFor(t, "bob queued for the host", func() bool { return c.Stats().PendingPermits == 1 })
	go call("carol", "/carol")
	waitFor(t, "carol queued for the host", func() bool { return c.Stats().PendingPermits == 2 })
	close(release)
	for i := 0; i < 3; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(served, " "); got != "/hold /bob /carol" {
		t.Fatalf("served %s, want /hold /bob /carol", got)
	}
	if _, _, maxOpen := tracker.snapshot(); maxOpen > 1 {
		t.Fatalf("the server saw %d connections, MaxConnsPerHost 1", maxOpen)
	}
}
