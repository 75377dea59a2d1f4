package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// h2Server is Go's HTTP/2 server over TLS (httptest), counting the
// connections it accepts and the requests running at once.
type h2Server struct {
	*httptest.Server
	mem              *memListener // the server's listener, when it is in memory
	conns            atomic.Int64
	running, maxRuns atomic.Int64
	roots            *x509.CertPool
}

func newH2Server(t *testing.T, maxStreams uint32, h http.HandlerFunc) *h2Server {
	t.Helper()
	return startH2Server(t, &h2Server{}, maxStreams, h)
}

// newMemH2Server is newH2Server on an in-memory listener, for a test in a
// testing/synctest bubble; its client dials through the listener.
func newMemH2Server(t *testing.T, maxStreams uint32, h http.HandlerFunc) *h2Server {
	t.Helper()
	return startH2Server(t, &h2Server{mem: newMemListener()}, maxStreams, h)
}

func startH2Server(t *testing.T, s *h2Server, maxStreams uint32, h http.HandlerFunc) *h2Server {
	t.Helper()
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.running.Add(1)
		defer s.running.Add(-1)
		for {
			m := s.maxRuns.Load()
			if n <= m || s.maxRuns.CompareAndSwap(m, n) {
				break
			}
		}
		if r.ProtoMajor != 2 {
			http.Error(w, "not HTTP/2: "+r.Proto, http.StatusHTTPVersionNotSupported)
			return
		}
		h(w, r)
	}))
	s.EnableHTTP2 = true
	if maxStreams > 0 {
		s.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: int(maxStreams)}
	}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	if s.mem != nil {
		s.Listener = s.mem
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	s.roots = x509.NewCertPool()
	s.roots.AddCert(s.Certificate())
	return s
}

func (s *h2Server) client(t *testing.T, cfg Config) *Client {
	t.Helper()
	cfg.TLSConfig = &tls.Config{RootCAs: s.roots}
	if s.mem != nil {
		cfg.DialContext = s.mem.dial
	}
	return newClient(t, cfg)
}

// gate holds requests until released, counting those that arrived.
type gate struct {
	arrived atomic.Int64
	open    chan struct{}
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) handler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/warm" {
		io.WriteString(w, "ok warm") // not held: it teaches the client the server's SETTINGS
		return
	}
	g.arrived.Add(1)
	select {
	case <-g.open:
	case <-r.Context().Done():
		return
	}
	io.WriteString(w, "ok "+r.URL.Path)
}

// getAll runs n GETs of path at once and returns their errors.
func getAll(t *testing.T, c *Client, url string, n int) chan error {
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func(i int) {
			resp, err := c.RoundTrip(newGet(t, fmt.Sprintf("%s/%d", url, i)))
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.ProtoMajor != 2 || !strings.HasPrefix(string(b), "ok") {
					err = fmt.Errorf("%s: %d %q", resp.Proto, resp.StatusCode, b)
				}
			}
			errs <- err
		}(i)
	}
	return errs
}

func drain(t *testing.T, errs chan error, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestHundredConcurrentRequestsShareOneHTTP2Connection(t *testing.T) {
	g := newGate()
	srv := newH2Server(t, 0, g.handler)
	c := srv.client(t, Config{})
	errs := getAll(t, c, srv.URL, 100)
	waitFor(t, "100 requests running at the server", func() bool { return g.arrived.Load() == 100 })
	st := c.Stats()
	if st.Open != 1 || st.Streams != 100 || st.Leased != 1 || st.Routes[0].Streams != 100 {
		t.Fatalf("stats with 100 streams: open %d streams %d leased %d", st.Open, st.Streams, st.Leased)
	}
	close(g.open)
	drain(t, errs, 100)
	if n := srv.conns.Load(); n != 1 {
		t.Fatalf("server saw %d connections", n)
	}
	waitFor(t, "the connection idle", func() bool { st := c.Stats(); return st.Idle == 1 && st.Streams == 0 })
}

// A server that takes 4 streams per connection: 20 blocked requests open 5
// connections; in strict mode they wait for streams on one.
func TestAFourStreamServerGetsMoreConnectionsOrOneInStrictMode(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			g := newGate()
			srv := newH2Server(t, 4, g.handler)
			cfg := Config{MaxConnsPerRoute: 8}
			if strict {
				cfg.HTTP2 = &http.HTTP2Config{StrictMaxConcurrentRequests: true}
			}
			c := srv.client(t, cfg)
			get(t, c, srv.URL+"/warm") // learns the server's SETTINGS (4 streams)
			errs := getAll(t, c, srv.URL, 20)
			want := int64(20) // 5 connections of 4 streams
			if strict {
				want = 4 // one connection's 4 streams; 16 wait
			}
			waitFor(t, "the streams the server allows, the others queued", func() bool {
				return g.arrived.Load() == want && c.Stats().Pending == 20-int(want)
			})
			st := c.Stats()
			if strict && (st.Open != 1 || st.Pending != 16) || !strict && (st.Open != 5) {
				t.Fatalf("strict=%v: open %d pending %d streams %d", strict, st.Open, st.Pending, st.Streams)
			}
			close(g.open)
			drain(t, errs, 20)
			if got := srv.conns.Load(); strict && got != 1 || !strict && got != 5 {
				t.Fatalf("server saw %d connections", got)
			}
			if srv.maxRuns.Load() > want {
				t.Fatalf("the server ran %d at once", srv.maxRuns.Load())
			}
		})
	}
}

// MaxConnsPerRoute caps HTTP/2 connections too; the other requests queue
// and are served in arrival order.
func TestMaxConnsPerRouteCapsHTTP2ConnectionsAndQueuesInOrder(t *testing.T) {
	g := newGate()
	var mu sync.Mutex
	var order []string
	srv := newH2Server(t, 2, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/q") {
			mu.Lock()
			order = append(order, r.URL.Path)
			mu.Unlock()
			io.WriteString(w, "ok")
			return
		}
		g.handler(w, r)
	})
	c := srv.client(t, Config{MaxConnsPerRoute: 2})
	get(t, c, srv.URL+"/warm")
	errs := getAll(t, c, srv.URL, 4) // fills 2 connections x 2 streams
	waitFor(t, "4 streams running", func() bool { return g.arrived.Load() == 4 })
	queued := make(chan error, 5)
	for i := 0; i < 5; i++ {
		go func(i int) {
			resp, err := c.RoundTrip(newGet(t, fmt.Sprintf("%s/q%d", srv.URL, i)))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			queued <- err
		}(i)
		waitFor(t, "the request queued", func() bool { return c.Stats().Pending == i+1 })
	}
	if st := c.Stats(); st.Open != 2 {
		t.Fatalf("%d connections with MaxConnsPerRoute 2", st.Open)
	}
	close(g.open)
	drain(t, errs, 4)
	for i := 0; i < 5; i++ {
		if err := <-queued; err != nil {
			t.Fatal(err)
		}
	}
	// FIFO: the route granted the queued requests in their arrival order (its
	// recent waits, newest first, with their positions on arrival). Which
	// reaches the server first depends on the callers' goroutines.
	var pos []int
	for _, w := range c.Stats().Routes[0].RecentWaits[:5] {
		pos = append(pos, w.QueuePos)
	}
	if fmt.Sprint(pos) != "[5 4 3 2 1]" {
		t.Fatalf("grants by queue position, newest first: %v, want [5 4 3 2 1]", pos)
	}
	if len(order) != 5 {
		t.Fatalf("served %v", order)
	}
	if n := srv.conns.Load(); n > 2 {
		t.Fatalf("server saw %d connections", n)
	}
}

// A GOAWAY in the middle of the load fails no request: streams above its
// last stream id are replayed on another connection, whatever the method.
// (Two GOAWAYs in 200 requests, 100 of them in flight at a time: each refuses
// dozens of streams.)
func TestAGOAWAYInTheMiddleOfTheLoadFailsNoRequest(t *testing.T) {
	var served atomic.Int64
	srv := newH2Server(t, 100, func(w http.ResponseWriter, r *http.Request) {
		if n := served.Add(1); n == 60 || n == 140 {
			w.Header().Set("Connection", "close") // Go's h2 server: a graceful GOAWAY
		}
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	})
	c := srv.client(t, Config{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			method := http.MethodGet
			if i%2 == 1 {
				method = http.MethodPost
			}
			req, _ := http.NewRequest(method, srv.URL, strings.NewReader("body"))
			resp, err := c.RoundTrip(req)
			if err != nil {
				failed.Add(1)
				t.Errorf("%s %d: %v", method, i, err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}(i)
	}
	wg.Wait()
	if st := c.Stats(); failed.Load() > 0 {
		t.Logf("retries %d, refused by the budget %d", st.Retries, st.RetriesRefused)
	}
	if n := srv.conns.Load(); n < 2 {
		t.Fatalf("server saw %d connections: no GOAWAY happened", n)
	}
	st := c.Stats()
	t.Logf("200 requests over %d connections: %d failed; closed by %v; retries %d", srv.conns.Load(), failed.Load(),
		st.Routes[0].ClosedBy, st.Retries)
}

func TestIdentitiesNeverShareAnHTTP2Connection(t *testing.T) {
	seen := sync.Map{}
	srv := newH2Server(t, 0, func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Id")
		prev, loaded := seen.LoadOrStore(r.RemoteAddr, id)
		if loaded && prev != id {
			http.Error(w, "connection shared by "+prev.(string)+" and "+id, http.StatusConflict)
			return
		}
		io.WriteString(w, "ok")
	})
	c := srv.client(t, Config{})
	var wg sync.WaitGroup
	for i := 0; i < 60; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id := fmt.Sprintf("user%d", i%3)
			req, _ := http.NewRequestWithContext(WithIdentity(context.Background(), id), http.MethodGet, srv.URL, nil)
			req.Header.Set("X-Id", id)
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s", b)
			}
		}(i)
	}
	wg.Wait()
	if n := srv.conns.Load(); n != 3 {
		t.Fatalf("server saw %d connections for 3 identities", n)
	}
}

// An idle HTTP/2 connection is the least recently used connection another
// route's request evicts under MaxConnsTotal.
func TestAnIdleHTTP2ConnectionIsEvictedForAnotherRoute(t *testing.T) {
	a := newH2Server(t, 0, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok a") })
	b := newH2Server(t, 0, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok b") })
	pool := x509.NewCertPool()
	pool.AddCert(a.Certificate())
	pool.AddCert(b.Certificate())
	c := newClient(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1, TLSConfig: &tls.Config{RootCAs: pool}})
	get(t, c, a.URL)
	if got := get(t, c, b.URL); got != "ok b" {
		t.Fatal(got)
	}
	st := c.Stats()
	if st.Open != 1 || st.Evictions != 1 {
		t.Fatalf("after a request to another route: %+v", st)
	}
}

func TestHTTP2ResponsesCarryTLSAndTheConnectionInTraces(t *testing.T) {
	srv := newH2Server(t, 0, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	c := srv.client(t, Config{})
	var conn net.Conn
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn },
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" || conn == nil {
		t.Fatalf("proto %s, TLS %v, GotConnInfo.Conn %v", resp.Proto, resp.TLS != nil, conn)
	}
}

func TestProtocolsChooseBetweenHTTP1AndHTTP2(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	var h1 http.Protocols
	h1.SetHTTP1(true)
	for _, tc := range []struct {
		protocols *http.Protocols
		want      string
	}{{nil, "HTTP/2.0"}, {&h1, "HTTP/1.1"}} {
		c := newClient(t, Config{Protocols: tc.protocols, TLSConfig: &tls.Config{RootCAs: roots}})
		if got := get(t, c, srv.URL); got != tc.want {
			t.Fatalf("Protocols %v: %s, want %s", tc.protocols, got, tc.want)
		}
	}
}

// h2c with prior knowledge on an http route, when Protocols has
// UnencryptedHTTP2 and not HTTP1.
func TestH2CWithPriorKnowledge(t *testing.T) {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	c := newClient(t, Config{Protocols: &p})
	for i := 0; i < 3; i++ {
		if got := get(t, c, srv.URL); got != "HTTP/2.0" {
			t.Fatalf("h2c: %s", got)
		}
	}
	if st := c.Stats(); st.Open != 1 {
		t.Fatalf("%d connections", st.Open)
	}
}

// Aborting a Handle whose request is an HTTP/2 stream resets that stream,
// not the connection: other streams finish and the connection stays.
func TestAbortingAStreamLeavesTheConnection(t *testing.T) {
	g := newGate()
	srv := newH2Server(t, 0, g.handler)
	c := srv.client(t, Config{})
	get(t, c, srv.URL+"/warm")
	errs := getAll(t, c, srv.URL, 3)
	h := c.Send(newGet(t, srv.URL+"/aborted"), nil)
	waitFor(t, "4 streams", func() bool { return g.arrived.Load() == 4 })
	h.Abort()
	close(g.open)
	drain(t, errs, 3)
	if n := srv.conns.Load(); n != 1 {
		t.Fatalf("server saw %d connections", n)
	}
	waitFor(t, "one idle connection", func() bool { st := c.Stats(); return st.Open == 1 && st.Idle == 1 })
}
