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

// pauseProxy forwards TCP connections from 127.0.0.1 to a backend, and can stop
// forwarding what the backend sends (a server that stops answering, as far as
// the client can tell) until resumed. Its goroutines end in Close, at cleanup.
type pauseProxy struct {
	ln      net.Listener
	backend string
	wg      sync.WaitGroup

	mu     sync.Mutex
	cond   *sync.Cond
	paused bool
	closed bool
	conns  []net.Conn
}

func startPauseProxy(t *testing.T, backend string) *pauseProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pauseProxy{ln: ln, backend: backend}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept() // owned by p: Close waits
	t.Cleanup(p.Close)
	return p
}

func (p *pauseProxy) Addr() string { return p.ln.Addr().String() }

// Pause stops forwarding the backend's bytes; Resume forwards them again.
func (p *pauseProxy) Pause()  { p.set(true) }
func (p *pauseProxy) Resume() { p.set(false) }

func (p *pauseProxy) set(paused bool) {
	p.mu.Lock()
	p.paused = paused
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *pauseProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.backend)
		if err != nil {
			down.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			up.Close()
			down.Close()
			return
		}
		p.conns = append(p.conns, up, down)
		p.mu.Unlock()
		p.wg.Add(2)
		go func() { // owned by p
			defer p.wg.Done()
			io.Copy(up, down)
			up.Close()
		}()
		go func() { // owned by p
			defer p.wg.Done()
			p.forward(down, up)
			down.Close()
		}()
	}
}

// forward copies the backend's bytes to the client, holding them while paused.
func (p *pauseProxy) forward(down, up net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.paused && !p.closed {
				p.cond.Wait()
			}
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return
			}
			if _, werr := down.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *pauseProxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	conns := p.conns
	p.mu.Unlock()
	p.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	p.wg.Wait()
}
