package client

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// rawServer is a TCP server on 127.0.0.1 (or on a memListener, for tests in a
// testing/synctest bubble) that writes exact bytes: each accepted
// connection is handed to the test's handler on a goroutine the server owns
// (Close closes every connection and waits for the handlers). It counts what it
// receives, so tests prove limits and "nothing sent" on the server's side.
type rawServer struct {
	ln      net.Listener
	mem     *memListener // ln, when it is in memory
	handler func(*rawConn)
	wg      sync.WaitGroup
	bytesIn atomic.Int64

	mu       sync.Mutex
	conns    []*rawConn
	requests []string // "c<conn> METHOD /path", in arrival order
}

// rawConn is the server's side of one connection. id counts from 1 in accept order.
type rawConn struct {
	net.Conn
	br  *bufio.Reader
	id  int
	srv *rawServer
}

func newRawServer(t *testing.T, handler func(*rawConn)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveRaw(&rawServer{ln: ln, handler: handler})
}

// newMemServer is newRawServer on an in-memory listener, for a test in a
// testing/synctest bubble.
func newMemServer(handler func(*rawConn)) *rawServer {
	mem := newMemListener()
	return serveRaw(&rawServer{ln: mem, mem: mem, handler: handler})
}

func serveRaw(s *rawServer) *rawServer {
	s.wg.Add(1)
	go s.accept() // owned by s.wg; ends when Close closes the listener
	return s
}

func (s *rawServer) accept() {
	defer s.wg.Done()
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		c := &rawConn{Conn: nc, id: len(s.conns) + 1, srv: s}
		c.br = bufio.NewReader(&serverCountingReader{r: nc, n: &s.bytesIn})
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() { // owned by s.wg; ends when the handler returns
			defer s.wg.Done()
			defer nc.Close()
			s.handler(c)
		}()
	}
}

// Close closes the listener and every connection and waits for the handlers.
func (s *rawServer) Close() {
	s.ln.Close()
	s.mu.Lock()
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *rawServer) URL() string { return "http://" + s.ln.Addr().String() }

func (s *rawServer) accepted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *rawServer) requestLog() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

// readRequest reads one request and its whole body, and logs it.
func (c *rawConn) readRequest() (*http.Request, []byte, error) {
	req, err := http.ReadRequest(c.br)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, nil, err
	}
	c.srv.mu.Lock()
	c.srv.requests = append(c.srv.requests, fmt.Sprintf("c%d %s %s", c.id, req.Method, req.URL.Path))
	c.srv.mu.Unlock()
	return req, body, nil
}

// readHead reads a request head only (its body, if any, stays unread).
func (c *rawConn) readHead() (*http.Request, error) {
	tp := textproto.NewReader(c.br)
	line, err := tp.ReadLine()
	if err != nil {
		return nil, err
	}
	hdr, err := tp.ReadMIMEHeader()
	if err != nil {
		return nil, err
	}
	method, rest, _ := strings.Cut(line, " ")
	path, _, _ := strings.Cut(rest, " ")
	c.srv.mu.Lock()
	c.srv.requests = append(c.srv.requests, fmt.Sprintf("c%d %s %s", c.id, method, path))
	c.srv.mu.Unlock()
	return &http.Request{Method: method, Header: http.Header(hdr)}, nil
}

func (c *rawConn) write(s string) error {
	_, err := io.WriteString(c.Conn, s)
	return err
}

// serve answers every request on the connection with answer(request number
// on this connection, from 1) until the client closes it.
func (c *rawConn) serve(answer func(n int, req *http.Request) string) {
	for n := 1; ; n++ {
		req, _, err := c.readRequest()
		if err != nil {
			return
		}
		if c.write(answer(n, req)) != nil {
			return
		}
	}
}

// drainUntilClosed reads until the client closes the connection and returns
// how many bytes came.
func (c *rawConn) drainUntilClosed() int64 {
	n, _ := io.Copy(io.Discard, c.br)
	return n
}

type serverCountingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (r *serverCountingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.Add(int64(n))
	return n, err
}

const okResponse = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// harness is a client wired to a raw server through a dialer that counts the
// client's sockets: how many were dialed, how many are open now and at most,
// and how many bytes the client read from them.
type harness struct {
	t   *testing.T
	srv *rawServer
	c   *Client
	cfg Config

	dials     atomic.Int32
	open      atomic.Int64
	peak      atomic.Int64
	bytesRead atomic.Int64
}

func newHarness(t *testing.T, cfg Config, handler func(*rawConn)) *harness {
	t.Helper()
	return harnessOn(t, newRawServer(t, handler), cfg)
}

// newMemHarness is newHarness on an in-memory network (memListener), for a
// test that runs in a testing/synctest bubble, where time is the bubble's fake
// clock: the pool's timers, the server's deadlines and the test's sleeps.
func newMemHarness(t *testing.T, cfg Config, handler func(*rawConn)) *harness {
	t.Helper()
	return harnessOn(t, newMemServer(handler), cfg)
}

func harnessOn(t *testing.T, srv *rawServer, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, srv: srv}
	t.Cleanup(h.srv.Close) // after the client's Close: cleanups run last-in first-out
	if cfg.MaxConnsPerRoute == 0 {
		cfg.MaxConnsPerRoute = 2
	}
	if cfg.MaxConnsTotal == 0 {
		cfg.MaxConnsTotal = 4
	}
	if cfg.DialContext == nil {
		cfg.DialContext = h.dial
	}
	h.c, h.cfg = newClient(t, cfg), cfg
	return h
}

func (h *harness) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	dial := (&net.Dialer{}).DialContext
	if h.srv.mem != nil {
		dial = h.srv.mem.dial
	}
	nc, err := dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	h.dials.Add(1)
	raisePeak(&h.peak, h.open.Add(1))
	return &countedConn{countedClose: countedClose{Conn: nc, open: &h.open}, read: &h.bytesRead}, nil
}

// countedConn is a countedClose that also counts the bytes read from it.
type countedConn struct {
	countedClose
	read *atomic.Int64
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (h *harness) newRequest(method, path string, body io.Reader) *http.Request {
	h.t.Helper()
	req, err := http.NewRequest(method, h.srv.URL()+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	return req
}

// get sends a request and reads its whole body.
func (h *harness) do(req *http.Request) (*http.Response, string, error) {
	h.t.Helper()
	resp, err := h.c.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// mustGet sends a GET and fails the test unless it answers 200 with want.
func (h *harness) mustGet(path, want string) {
	h.t.Helper()
	resp, body, err := h.do(h.newRequest("GET", path, nil))
	if err != nil {
		h.t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != 200 || body != want {
		h.t.Fatalf("GET %s: %d %q, want 200 %q (pool: %+v)", path, resp.StatusCode, clip(body), clip(want), h.c.Stats().Routes)
	}
}

// closedBy returns the route's count of connections closed for reason.
func (h *harness) closedBy(reason string) uint64 {
	var n uint64
	for _, r := range h.c.Stats().Routes {
		n += r.ClosedBy[reason]
	}
	return n
}

// settle checks the pool after a case: nothing leased, pending or in flight, no
// route above its limit, the client's open sockets are exactly the pool's, and
// the client never held more sockets than MaxConnsPerRoute.
func (h *harness) settle() {
	h.t.Helper()
	st := h.c.Stats()
	if st.Leased != 0 || st.Pending != 0 || st.InFlight != 0 || st.PendingAdmission != 0 {
		h.t.Errorf("pool not settled: leased %d, pending %d, in flight %d, pending admission %d",
			st.Leased, st.Pending, st.InFlight, st.PendingAdmission)
	}
	if st.Open > st.MaxConnsTotal {
		h.t.Errorf("open %d > MaxConnsTotal %d", st.Open, st.MaxConnsTotal)
	}
	for _, r := range st.Routes {
		if r.Open > r.Max {
			h.t.Errorf("route %s: open %d > max %d", r.Route, r.Open, r.Max)
		}
	}
	if open := h.open.Load(); int(open) != st.Open {
		h.t.Errorf("client holds %d sockets, pool counts %d open", open, st.Open)
	}
	if peak := h.peak.Load(); int(peak) > h.cfg.MaxConnsPerRoute {
		h.t.Errorf("client held %d sockets at once, MaxConnsPerRoute is %d", peak, h.cfg.MaxConnsPerRoute)
	}
}

func wantLog(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("server saw %q, want %q", got, want)
	}
}

// clip shortens s for failure messages.
func clip(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%s...(%d bytes)", s[:80], len(s))
	}
	return s
}
