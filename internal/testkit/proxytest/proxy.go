// Package proxytest provides in-process forward proxies for tests: an HTTP proxy
// (CONNECT tunnels and absolute-form forwarding, optionally over TLS and with
// Basic authentication), a SOCKS5 proxy (RFC 1928, with RFC 1929
// username/password), and self-signed certificates. Each proxy counts its
// client connections and records what it was asked, so tests can count on the
// proxy's side. Every goroutine they start ends in Close.
package proxytest

import (
	"bufio"
	"crypto/tls"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
)

// Seen is one request an HTTP proxy received.
type Seen struct {
	Conn       int    // the proxy connection it came on, numbered from 1
	Method     string // "CONNECT", "GET", ...
	RequestURI string // as sent: "host:443" for CONNECT, "http://host/path" in absolute-form
	ProxyAuth  string // the Proxy-Authorization header, "" when absent
}

// HTTPProxy is a forward proxy listening on 127.0.0.1.
type HTTPProxy struct {
	// URL is the proxy's URL without credentials: http://127.0.0.1:port, or
	// https:// when started with TLS.
	URL *url.URL

	user, password string // required credentials; none when user is ""
	connectStatus  int    // when not 0, every CONNECT is refused with this status

	ln        net.Listener
	transport *http.Transport
	wg        sync.WaitGroup

	mu     sync.Mutex
	conns  int
	open   map[net.Conn]struct{}
	seen   []Seen
	closed bool
}

// Option configures an HTTPProxy.
type Option func(*HTTPProxy)

// WithAuth makes the proxy require Basic credentials user:password
// (407 otherwise).
func WithAuth(user, password string) Option {
	return func(p *HTTPProxy) { p.user, p.password = user, password }
}

// WithConnectStatus makes the proxy refuse every CONNECT with status code.
func WithConnectStatus(code int) Option {
	return func(p *HTTPProxy) { p.connectStatus = code }
}

// NewHTTPProxy starts a plain HTTP proxy on 127.0.0.1.
func NewHTTPProxy(opts ...Option) *HTTPProxy { return newHTTPProxy(nil, opts) }

// NewHTTPSProxy starts a proxy that clients reach over TLS with cert.
func NewHTTPSProxy(cert tls.Certificate, opts ...Option) *HTTPProxy {
	return newHTTPProxy(&tls.Config{Certificates: []tls.Certificate{cert}}, opts)
}

func newHTTPProxy(tc *tls.Config, opts []Option) *HTTPProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("proxytest: listen: " + err.Error())
	}
	scheme := "http"
	if tc != nil {
		ln = tls.NewListener(ln, tc)
		scheme = "https"
	}
	p := &HTTPProxy{
		URL:       &url.URL{Scheme: scheme, Host: ln.Addr().String()},
		ln:        ln,
		transport: &http.Transport{Proxy: nil, DisableCompression: true},
		open:      map[net.Conn]struct{}{},
	}
	for _, o := range opts {
		o(p)
	}
	p.wg.Add(1)
	go p.accept() // owned by p; ends when Close closes the listener
	return p
}

// URLWithUser returns the proxy's URL carrying user:password.
func (p *HTTPProxy) URLWithUser(user, password string) *url.URL {
	u := *p.URL
	u.User = url.UserPassword(user, password)
	return &u
}

// Conns returns how many client connections the proxy accepted.
func (p *HTTPProxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}

// Seen returns the requests the proxy received, in arrival order.
func (p *HTTPProxy) Seen() []Seen {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Seen(nil), p.seen...)
}

// Close stops the proxy, closes its connections and waits for its goroutines.
func (p *HTTPProxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.open {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
	p.transport.CloseIdleConnections()
}

func (p *HTTPProxy) track(c net.Conn) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, false
	}
	p.open[c] = struct{}{}
	p.conns++
	return p.conns, true
}

func (p *HTTPProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.open, c)
	p.mu.Unlock()
	c.Close()
}

func (p *HTTPProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		n, ok := p.track(c)
		if !ok {
			c.Close()
			return
		}
		p.wg.Add(1)
		go func() { // owned by p: ends when the client or Close closes c
			defer p.wg.Done()
			defer p.untrack(c)
			p.serve(c, n)
		}()
	}
}

func (p *HTTPProxy) serve(c net.Conn, n int) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		auth := req.Header.Get("Proxy-Authorization")
		p.mu.Lock()
		p.seen = append(p.seen, Seen{Conn: n, Method: req.Method, RequestURI: req.RequestURI, ProxyAuth: auth})
		p.mu.Unlock()
		if p.user != "" && auth != "Basic "+base64.StdEncoding.EncodeToString([]byte(p.user+":"+p.password)) {
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\n"+
				"Proxy-Authenticate: Basic realm=\"proxytest\"\r\nContent-Length: 0\r\n\r\n")
			if req.Method == http.MethodConnect {
				return
			}
			continue
		}
		if req.Method == http.MethodConnect {
			p.tunnel(c, br, req)
			return
		}
		if !p.forward(c, req) {
			return
		}
	}
}

// tunnel answers CONNECT and relays bytes both ways until either side closes.
func (p *HTTPProxy) tunnel(c net.Conn, br *bufio.Reader, req *http.Request) {
	if p.connectStatus != 0 {
		io.WriteString(c, "HTTP/1.1 "+strconv.Itoa(p.connectStatus)+" "+http.StatusText(p.connectStatus)+
			"\r\nContent-Length: 0\r\n\r\n")
		return
	}
	up, err := net.Dial("tcp", req.RequestURI)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	defer up.Close()
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	Relay(c, br, up)
}

// forward sends an absolute-form request on to its origin, without the
// hop-by-hop and proxy headers, and writes the answer back. It reports whether
// the client connection may carry another request.
func (p *HTTPProxy) forward(c net.Conn, req *http.Request) bool {
	if !req.URL.IsAbs() {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return false
	}
	out := req.Clone(req.Context())
	out.RequestURI = ""
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "Connection", "Keep-Alive", "Te", "Trailer", "Upgrade"} {
		out.Header.Del(h)
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return !req.Close
	}
	defer resp.Body.Close()
	resp.Close = req.Close
	bw := bufio.NewWriter(c)
	if err := resp.Write(bw); err != nil || bw.Flush() != nil {
		return false
	}
	return !req.Close
}

// Relay copies between a client connection (whose reader may hold buffered
// bytes) and an upstream one until either side ends, then closes both.
func Relay(c net.Conn, br *bufio.Reader, up net.Conn) {
	done := make(chan struct{})
	go func() { // owned by Relay: waited for below
		io.Copy(up, br)
		up.Close()
		c.Close()
		close(done)
	}()
	io.Copy(c, up)
	c.Close()
	up.Close()
	<-done
}
