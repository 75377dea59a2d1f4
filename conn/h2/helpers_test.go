package h2

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// waitTimeout bounds every wait for an event: generous, because the machine is
// shared and tests run under -race; no test asserts how long anything took.
const waitTimeout = 30 * time.Second

// startH2 starts Go's HTTP/2 server over TLS on 127.0.0.1 with cfg (nil = the
// defaults), closed at the end of the test. It counts the connections it accepted.
func startH2(t testing.TB, cfg *http.HTTP2Config, h http.Handler) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.EnableHTTP2 = true
	ts.Config.HTTP2 = cfg
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	conns := new(atomic.Int32)
	ts.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts, conns
}

// dialH2 dials addr (ts itself, or a proxy in front of it) with TLS, offering h2
// and http/1.1 by ALPN and trusting ts's certificate.
func dialH2(t *testing.T, ts *httptest.Server, addr string) *tls.Conn {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	tc, err := tls.Dial("tcp", addr, &tls.Config{
		RootCAs:    roots,
		ServerName: "127.0.0.1",
		NextProtos: []string{"h2", "http/1.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// newConn starts a Conn on nc reporting to rec, closed at the end of the test.
func newConn(t *testing.T, nc net.Conn, opt Options, rec *recorder) *Conn {
	t.Helper()
	if rec != nil {
		opt.Events = rec.events(t)
	}
	c, err := New(nc, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedEvent is one Closed callback.
type closedEvent struct {
	reason Reason
	err    error
}

// recorder collects a Conn's events and checks their rules: Draining and Closed
// at most once, nothing after Closed.
type recorder struct {
	streams  chan Streams
	draining chan Reason
	closed   chan closedEvent
	over     atomic.Bool
}

func newRecorder() *recorder {
	return &recorder{
		streams:  make(chan Streams, 64),
		draining: make(chan Reason, 4),
		closed:   make(chan closedEvent, 4),
	}
}

func (r *recorder) events(t *testing.T) Events {
	after := func(what string) {
		if r.over.Load() {
			t.Errorf("%s reported after Closed", what)
		}
	}
	return Events{
		StreamsChanged: func(s Streams) {
			after("StreamsChanged")
			select {
			case r.streams <- s:
			default:
				t.Errorf("too many StreamsChanged events")
			}
		},
		Draining: func(reason Reason) {
			after("Draining")
			if len(r.draining) > 0 {
				t.Errorf("Draining reported twice")
			}
			r.draining <- reason
		},
		Closed: func(reason Reason, err error) {
			after("Closed")
			r.over.Store(true)
			r.closed <- closedEvent{reason, err}
		},
	}
}

// waitFor returns the next value of ch, failing the test after waitTimeout.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("no %s within %v", what, waitTimeout)
		var zero T
		return zero
	}
}

// get sends a GET for url on c and returns the status and body, closing it.
func get(t *testing.T, c *Conn, url string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.RoundTrip(req, nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// gate holds what a connection reads, from the moment Hold is called until
// Release: a server that stops answering, as far as the client can tell.
type gate struct {
	mu     sync.Mutex
	cond   *sync.Cond
	held   bool
	closed bool
}

func (g *gate) Hold()    { g.set(true) }
func (g *gate) Release() { g.set(false) }

func (g *gate) set(held bool) {
	g.mu.Lock()
	g.held = held
	g.cond.Broadcast()
	g.mu.Unlock()
}

// pass waits while the gate is held; false once the connection is closed.
func (g *gate) pass() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.held && !g.closed {
		g.cond.Wait()
	}
	return !g.closed
}

// gatedConn is a TCP connection whose reads go through a gate.
type gatedConn struct {
	net.Conn
	g *gate
}

// Read holds what it read while the gate is held, as a stalled network would.
func (c *gatedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.g.pass() {
		return 0, net.ErrClosed
	}
	return n, err
}

func (c *gatedConn) Close() error {
	c.g.mu.Lock()
	c.g.closed = true
	c.g.cond.Broadcast()
	c.g.mu.Unlock()
	return c.Conn.Close()
}

// dialH2Gated dials ts with TLS over a gated TCP connection. The handshake is
// complete when it returns, and the server cannot have sent anything after it
// yet (TLS 1.3: its first application data follows the client's Finished,
// which the handshake writes last), so a Hold at once holds the server's
// SETTINGS.
func dialH2Gated(t *testing.T, ts *httptest.Server) (*tls.Conn, *gate) {
	t.Helper()
	raw, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{}
	g.cond = sync.NewCond(&g.mu)
	roots := x509.NewCertPool()
	roots.AddCert(ts.Certificate())
	tc := tls.Client(&gatedConn{Conn: raw, g: g}, &tls.Config{
		RootCAs:    roots,
		ServerName: "127.0.0.1",
		NextProtos: []string{"h2", "http/1.1"},
		MinVersion: tls.VersionTLS13,
	})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc, g
}

// EndFunc is a func as an Ender, for the tests' RoundTrip calls.
type EndFunc func(err error)

// StreamEnded calls f.
func (f EndFunc) StreamEnded(err error) { f(err) }
