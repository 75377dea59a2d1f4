package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/connactor/connactor/client"
)

// target is one route of a scenario: the URL to GET, its authority, and the
// server address a connection to it is dialed to.
type target struct {
	addr string // where to dial: 127.0.0.k:port (the server's first address for named routes)
	host string // the URL's authority: addr, or rK.connbench.test:port
	url  string // http://host/13
	path string
}

// hostSuffix names the sweeps' routes (rK.connbench.test): the clients dial
// every such name to the server (see clientSpec.dialAddr), nothing resolves it.
const hostSuffix = ".connbench.test"

func targetsFor(srv *server, sc scenario) []target {
	if sc.TLS {
		return []target{{addr: srv.tlsAddr, host: srv.tlsAddr, url: "https://" + srv.tlsAddr + sc.Path, path: sc.Path}}
	}
	ts := make([]target, sc.Routes)
	for i := range ts {
		t := target{addr: srv.addrs[i%len(srv.addrs)], path: sc.Path}
		t.host = t.addr
		if sc.Hosts {
			_, port, _ := net.SplitHostPort(srv.addrs[0])
			t.addr = srv.addrs[0]
			t.host = net.JoinHostPort(fmt.Sprintf("r%d%s", i+1, hostSuffix), port)
		}
		t.url = "http://" + t.host + sc.Path
		ts[i] = t
	}
	return ts
}

// benchClient is one client under test, shared by a cell's callers.
type benchClient interface {
	// newWorker returns the per-caller state (pre-built requests, buffers);
	// called before the measurement starts.
	newWorker() worker
	// close releases the client's connections, once its callers are done.
	close()
}

// worker is one caller of a benchClient, used by one goroutine.
type worker interface {
	// do GETs targets[route], reads the body to its end and checks the status
	// and the body's length.
	do(route int) error
}

// clientSpec is what every client is built from.
type clientSpec struct {
	sc      scenario
	targets []target
	dials   *atomic.Int64 // counts new connections
	tls     *tls.Config   // trusts the server's certificate (TLS cells)
}

// dialAddr is where a connection to addr goes: the server, for the sweeps'
// named routes; addr itself otherwise.
func (s clientSpec) dialAddr(addr string) string {
	if s.sc.Hosts && strings.Contains(addr, hostSuffix+":") {
		return s.targets[0].addr
	}
	return addr
}

func newBenchClient(kind string, s clientSpec) (benchClient, error) {
	switch kind {
	case kindNetHTTP:
		return newNetHTTP(s, false), nil
	case kindNetHTTPH2:
		return newNetHTTP(s, true), nil
	case kindConnactor:
		return newConnactor(s, 0, nil)
	case kindConnactorAdaptive:
		return newConnactor(s, 0, &client.AdaptiveLimit{})
	case kindConnactorH2:
		return newConnactor(s, 2, nil)
	case kindConnactorH1TLS:
		return newConnactor(s, 1, nil)
	case kindFasthttp:
		return newFasthttp(s), nil
	case kindStdPool:
		return newStdPool(s)
	case kindRaw:
		return newRaw(s)
	}
	return nil, fmt.Errorf("unknown client %q", kind)
}

func countingDial(s clientSpec) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		s.dials.Add(1)
		return d.DialContext(ctx, network, s.dialAddr(addr))
	}
}

// --- net/http and connactor: both http.RoundTrippers, called directly ---

// stdClient drives an http.RoundTripper. Each worker builds its requests once
// and re-uses them (a request may be sent again once the previous response's
// body is closed), so request building is not measured, for either client.
type stdClient struct {
	rt      http.RoundTripper
	s       clientSpec
	closeFn func()
	proto   int // the HTTP major version every response must have (0 = any)
}

// newNetHTTP: net/http's Transport with MaxConnsPerHost and MaxIdleConnsPerHost
// at the scenario's per-route limit. It has no limit on open connections across
// hosts: with several routes, MaxIdleConns (the idle ones, least recently used
// closed first) is set to the scenario's total. Compression is off so that the
// requests on the wire match the other clients'. With h2 (the h2 cells) it
// speaks HTTP/2 over TLS by ALPN, and opens another connection only when the
// server's stream limit is reached.
func newNetHTTP(s clientSpec, h2 bool) *stdClient {
	tr := &http.Transport{
		MaxConnsPerHost:     s.sc.Conns,
		MaxIdleConnsPerHost: s.sc.Conns,
		DisableCompression:  true,
		DialContext:         countingDial(s),
	}
	if s.sc.Routes > 1 {
		tr.MaxIdleConns = s.sc.total()
	}
	c := &stdClient{rt: tr, s: s, closeFn: tr.CloseIdleConnections}
	if h2 {
		tr.ForceAttemptHTTP2, tr.TLSClientConfig, c.proto = true, s.tls.Clone(), 2
	}
	return c
}

// newConnactor: connactor with MaxConnsPerRoute at the scenario's per-route
// limit and MaxConnsTotal at its total, called through RoundTrip; compression
// off, as net/http's here (no Accept-Encoding: the same request bytes). proto
// 0 is plain HTTP/1.1; in the h2 cells, over TLS, 2 is HTTP/2 by ALPN (the
// default protocols) and 1 HTTP/1.1 only (MaxConnsPerRoute connections).
// adaptive, when not nil, turns the routes' adaptive limit on.
func newConnactor(s clientSpec, proto int, adaptive *client.AdaptiveLimit) (*stdClient, error) {
	total := s.sc.total()
	if s.sc.OpenTotal > 0 {
		total = s.sc.OpenTotal
	}
	cfg := client.Config{
		MaxConnsPerRoute:      s.sc.Conns,
		MaxConnsTotal:         total,
		MaxConcurrentRequests: max(client.DefaultMaxConcurrentRequests, s.sc.Callers),
		DisableCompression:    true, // as net/http's here: every client sends the same request
		Logger:                slog.New(slog.DiscardHandler),
		DialContext:           countingDial(s),
		Adaptive:              adaptive,
	}
	if proto > 0 {
		cfg.TLSConfig = s.tls.Clone()
	}
	if proto == 1 {
		cfg.Protocols = new(http.Protocols)
		cfg.Protocols.SetHTTP1(true)
	}
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	return &stdClient{rt: c, s: s, closeFn: func() { c.Close() }, proto: proto}, nil
}

func (c *stdClient) newWorker() worker {
	w := &stdWorker{rt: c.rt, want: c.s.sc.BodyLen, proto: c.proto, buf: make([]byte, 32<<10)}
	for _, t := range c.s.targets {
		req, err := http.NewRequest(http.MethodGet, t.url, nil)
		if err != nil {
			panic("connbench: internal error: " + err.Error())
		}
		w.reqs = append(w.reqs, req)
	}
	return w
}

func (c *stdClient) close() { c.closeFn() }

type stdWorker struct {
	rt    http.RoundTripper
	reqs  []*http.Request
	want  int
	proto int // the HTTP major version responses must have (0 = any)
	buf   []byte
}

func (w *stdWorker) do(route int) error {
	resp, err := w.rt.RoundTrip(w.reqs[route])
	if err != nil {
		return err
	}
	n := 0
	for {
		m, rerr := resp.Body.Read(w.buf)
		n += m
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			resp.Body.Close()
			return rerr
		}
	}
	resp.Body.Close()
	if w.proto != 0 && resp.ProtoMajor != w.proto {
		return fmt.Errorf("HTTP/%d response, want HTTP/%d", resp.ProtoMajor, w.proto)
	}
	return checkResponse(resp.StatusCode, n, w.want)
}

func checkResponse(status, n, want int) error {
	if status != http.StatusOK {
		return fmt.Errorf("status %d", status)
	}
	if n != want {
		return fmt.Errorf("body of %d bytes, want %d", n, want)
	}
	return nil
}

// --- fasthttp ---

// fastClient: fasthttp's HostClient (MaxConns at the per-route limit) for one
// route; for several routes, fasthttp.Client (MaxConnsPerHost; no limit across
// hosts). Callers wait for a free connection (MaxConnWaitTimeout) instead of
// failing with ErrNoFreeConns, as the other clients do. fasthttp reads each
// body whole into the response.
type fastClient struct {
	do      func(*fasthttp.Request, *fasthttp.Response) error
	s       clientSpec
	closeFn func()
}

func newFasthttp(s clientSpec) *fastClient {
	dial := func(addr string) (net.Conn, error) {
		s.dials.Add(1)
		return net.Dial("tcp", s.dialAddr(addr))
	}
	if s.sc.Routes == 1 {
		hc := &fasthttp.HostClient{Addr: s.targets[0].addr, MaxConns: s.sc.Conns,
			MaxConnWaitTimeout: time.Minute, Dial: dial}
		return &fastClient{do: hc.Do, s: s, closeFn: hc.CloseIdleConnections}
	}
	c := &fasthttp.Client{MaxConnsPerHost: s.sc.Conns, MaxConnWaitTimeout: time.Minute, Dial: dial}
	return &fastClient{do: c.Do, s: s, closeFn: c.CloseIdleConnections}
}

func (c *fastClient) newWorker() worker {
	w := &fastWorker{doFn: c.do, want: c.s.sc.BodyLen, resp: &fasthttp.Response{}}
	for _, t := range c.s.targets {
		req := &fasthttp.Request{}
		req.SetRequestURI(t.url)
		w.reqs = append(w.reqs, req)
	}
	return w
}

func (c *fastClient) close() { c.closeFn() }

type fastWorker struct {
	doFn func(*fasthttp.Request, *fasthttp.Response) error
	reqs []*fasthttp.Request
	resp *fasthttp.Response
	want int
}

func (w *fastWorker) do(route int) error {
	if err := w.doFn(w.reqs[route], w.resp); err != nil {
		return err
	}
	return checkResponse(w.resp.StatusCode(), len(w.resp.Body()), w.want)
}

// --- raw: the practical limit ---

// rawClient holds a fixed set of connections per route, dialed up front, in a
// buffered channel a caller takes one from; it writes a pre-serialised GET and
// reads the status line, the headers (Content-Length and Connection only) and
// the body with minimal parsing. A connection that fails or that the server
// closes is re-dialed on its next use.
type rawClient struct {
	pools []chan *rawConn // per route
	reqs  [][]byte
	s     clientSpec
}

type rawConn struct {
	addr string
	nc   net.Conn
	br   *bufio.Reader
}

func newRaw(s clientSpec) (*rawClient, error) {
	c := &rawClient{s: s}
	for _, t := range s.targets {
		pool := make(chan *rawConn, s.sc.Conns)
		for i := 0; i < s.sc.Conns; i++ {
			rc := &rawConn{addr: t.addr}
			if err := rc.dial(s.dials); err != nil {
				c.pools = append(c.pools, pool)
				c.close()
				return nil, err
			}
			pool <- rc
		}
		c.pools = append(c.pools, pool)
		c.reqs = append(c.reqs, []byte("GET "+t.path+" HTTP/1.1\r\nHost: "+t.host+"\r\nUser-Agent: connbench-raw\r\n\r\n"))
	}
	return c, nil
}

func (rc *rawConn) dial(dials *atomic.Int64) error {
	dials.Add(1)
	nc, err := net.Dial("tcp", rc.addr)
	if err != nil {
		return err
	}
	rc.nc = nc
	if rc.br == nil {
		rc.br = bufio.NewReaderSize(nc, 4096)
	} else {
		rc.br.Reset(nc)
	}
	return nil
}

func (c *rawClient) newWorker() worker { return c }

func (c *rawClient) close() {
	for _, p := range c.pools {
		close(p)
		for rc := range p {
			if rc.nc != nil {
				rc.nc.Close()
			}
		}
	}
}

func (c *rawClient) do(route int) error {
	pool := c.pools[route]
	rc := <-pool
	err := rc.exchange(c.reqs[route], c.s.sc.BodyLen, c.s.dials)
	pool <- rc
	return err
}

var (
	contentLength = []byte("content-length:")
	connection    = []byte("connection:")
	closeToken    = []byte("close")
)

func (rc *rawConn) exchange(req []byte, want int, dials *atomic.Int64) error {
	if rc.nc == nil {
		if err := rc.dial(dials); err != nil {
			return err
		}
	}
	fail := func(err error) error {
		rc.nc.Close()
		rc.nc = nil
		return err
	}
	if _, err := rc.nc.Write(req); err != nil {
		return fail(err)
	}
	line, err := rc.br.ReadSlice('\n')
	if err != nil {
		return fail(err)
	}
	if len(line) < 12 || string(line[9:12]) != "200" {
		return fail(fmt.Errorf("status line %q", line))
	}
	n, closing := -1, false
	for {
		line, err = rc.br.ReadSlice('\n')
		if err != nil {
			return fail(err)
		}
		if len(line) <= 2 { // "\r\n": end of the head
			break
		}
		switch {
		case hasPrefixFold(line, contentLength):
			n = atoi(line[len(contentLength):])
		case hasPrefixFold(line, connection):
			closing = bytes.EqualFold(bytes.TrimSpace(line[len(connection):]), closeToken)
		}
	}
	if n < 0 {
		return fail(fmt.Errorf("no Content-Length"))
	}
	if _, err := rc.br.Discard(n); err != nil {
		return fail(err)
	}
	if closing {
		rc.nc.Close()
		rc.nc = nil
	}
	return checkResponse(http.StatusOK, n, want)
}

func hasPrefixFold(line, prefix []byte) bool {
	return len(line) >= len(prefix) && bytes.EqualFold(line[:len(prefix)], prefix)
}

// atoi parses the decimal number in b, skipping spaces and the line end; -1
// when there is none.
func atoi(b []byte) int {
	n, digits := 0, 0
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			n = n*10 + int(c-'0')
			digits++
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
		default:
			return -1
		}
	}
	if digits == 0 {
		return -1
	}
	return n
}
