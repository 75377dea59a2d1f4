package conn

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"

	"golang.org/x/net/proxy"

	"github.com/connactor/connactor/route"
)

// ProxyConnectError is returned when a proxy refuses to open a CONNECT tunnel:
// 407 (it wants other credentials), 403, 502 (it could not reach the target),
// and so on. Nothing was sent to the target. Test with errors.As.
type ProxyConnectError struct {
	Proxy      string // the proxy, without credentials ("http://proxy:3128")
	Target     string // host:port the tunnel was asked for
	StatusCode int    // the proxy's status code (407, 502, ...)
	Status     string // the proxy's status line text ("407 Proxy Authentication Required")
}

func (e *ProxyConnectError) Error() string {
	return fmt.Sprintf("connactor: proxy %s refused CONNECT %s: %s", e.Proxy, e.Target, e.Status)
}

// ErrProxyProtocol is returned (wrapped) when a proxy's answer to CONNECT is not
// a valid tunnel: bytes before the client's first message, for instance.
var ErrProxyProtocol = errors.New("proxy protocol error")

// dialProxy returns a connection on which requests of route k can be written:
// through an http:// or https:// proxy, the proxy connection itself (plain HTTP
// targets, written in absolute-form) or a CONNECT tunnel to the target (HTTPS
// targets); through a socks5:// proxy, a relayed connection to the target. TLS to
// an HTTPS target is the caller's. Proxy credentials go to the proxy only: on
// CONNECT, in the SOCKS5 handshake, or (absolute-form) with each request.
func dialProxy(ctx context.Context, k route.Key, opt *Options, dl *dialLog) (net.Conn, error) {
	user := opt.ProxyCredentials.Lookup(k)
	switch k.ProxyScheme() {
	case "socks5", "socks5h":
		return dialSOCKS5(ctx, k, user, opt, dl)
	case "http", "https":
	default:
		return nil, fmt.Errorf("conn: %w %q", route.ErrUnsupportedProxy, k.ProxyScheme())
	}
	nc, err := dialTCP(ctx, k.ProxyAddr(), opt, dl)
	if err != nil {
		return nil, fmt.Errorf("conn: proxy %s: %w", k.Proxy, err)
	}
	if k.ProxyScheme() == "https" {
		tc, err := handshake(ctx, nc, k.ProxyHost(), opt, alpnHTTP11, dl)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("conn: proxy %s: %w", k.Proxy, err)
		}
		nc = tc
	}
	if k.AbsoluteForm() {
		return nc, nil
	}
	if err := connect(ctx, nc, k, user); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}

// connect asks the proxy on nc for a tunnel to k's target (RFC 9110 section
// 9.3.6) and reads its answer; any 2xx opens the tunnel. ctx interrupts it.
func connect(ctx context.Context, nc net.Conn, k route.Key, user *url.Userinfo) error {
	addr := k.Addr()
	req := &http.Request{
		Method: http.MethodConnect,
		URL:    &url.URL{Opaque: addr},
		Host:   addr,
		Header: http.Header{},
	}
	if user != nil {
		req.Header.Set("Proxy-Authorization", basicAuth(user))
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(aLongTimeAgo) })
	resp, err := roundTripConnect(nc, req)
	if !stop() {
		return fmt.Errorf("conn: proxy %s: CONNECT %s: %w", k.Proxy, addr, context.Cause(ctx))
	}
	if err != nil {
		return fmt.Errorf("conn: proxy %s: CONNECT %s: %w", k.Proxy, addr, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return &ProxyConnectError{Proxy: k.Proxy, Target: addr, StatusCode: resp.StatusCode, Status: resp.Status}
	}
	return nil
}

func roundTripConnect(nc net.Conn, req *http.Request) (*http.Response, error) {
	if err := req.Write(nc); err != nil {
		return nil, err
	}
	// The proxy's answer is read byte-exact up to its end: the tunnel's first
	// bytes belong to the TLS handshake, which the client starts, so anything
	// buffered beyond the head is a protocol error rather than data to keep.
	br := bufio.NewReader(nc)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 && br.Buffered() > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the CONNECT response", ErrProxyProtocol, br.Buffered())
	}
	return resp, nil
}

// dialSOCKS5 connects to k's target through k's SOCKS5 proxy (RFC 1928), with
// username/password authentication (RFC 1929) when the proxy URL has user info.
// The target's host name is sent to the proxy, which resolves it.
func dialSOCKS5(ctx context.Context, k route.Key, user *url.Userinfo, opt *Options, dl *dialLog) (net.Conn, error) {
	var auth *proxy.Auth
	if user != nil {
		pw, _ := user.Password()
		auth = &proxy.Auth{User: user.Username(), Password: pw}
	}
	d, err := proxy.SOCKS5("tcp", k.ProxyAddr(), auth, forwardDialer{opt, dl})
	if err != nil {
		return nil, fmt.Errorf("conn: proxy %s: %w", k.Proxy, err)
	}
	nc, err := d.(proxy.ContextDialer).DialContext(ctx, "tcp", k.Addr())
	if err != nil {
		return nil, fmt.Errorf("conn: proxy %s: %w", k.Proxy, err)
	}
	return nc, nil
}

// forwardDialer dials the SOCKS5 proxy with the client's TCP dialer.
type forwardDialer struct {
	opt *Options
	dl  *dialLog
}

func (f forwardDialer) Dial(network, addr string) (net.Conn, error) {
	return f.DialContext(context.Background(), network, addr)
}

func (f forwardDialer) DialContext(ctx context.Context, _, addr string) (net.Conn, error) {
	return dialTCP(ctx, addr, f.opt, f.dl)
}

// writeForm writes req on the connection's buffered writer: in origin-form,
// or in absolute-form when the connection goes to an HTTP proxy that forwards
// each request itself, with the proxy's credentials in Proxy-Authorization
// (the proxy consumes them; RFC 9110 section 11.7.2), and with
// "Accept-Encoding: gzip" when gzip is set. Requests without a body go through
// the connection's head writer (reqwrite.go); the others through
// Request.Write or WriteProxy, with the extra fields on a copy of the header:
// the caller's request is never changed.
func (c *Actor) writeForm(req *http.Request, gzip bool) error {
	proxy := c.key.AbsoluteForm()
	var extra [2]headField
	n := 0
	if gzip {
		extra[n] = headField{"Accept-Encoding", "gzip"}
		n++
	}
	if proxy {
		if auth := c.proxyAuthorization(); auth != "" {
			extra[n] = headField{"Proxy-Authorization", auth}
			n++
		}
	}
	if handled, err := c.head.write(c.bw, req, proxy, extra[:n]); handled {
		return err
	}
	if n > 0 {
		r := *req
		r.Header = req.Header.Clone()
		if r.Header == nil {
			r.Header = http.Header{}
		}
		for _, f := range extra[:n] {
			r.Header[f.key] = []string{f.value}
		}
		req = &r
	}
	if proxy {
		return req.WriteProxy(c.bw)
	}
	return req.Write(c.bw)
}

// proxyAuthorization is the Proxy-Authorization value of an absolute-form
// route's proxy ("" without credentials), computed on first use. Touched only
// by whoever writes the connection's request, one at a time.
func (c *Actor) proxyAuthorization() string {
	if !c.proxyAuthKnown {
		if user := c.opt.ProxyCredentials.Lookup(c.key); user != nil {
			c.proxyAuth = basicAuth(user)
		}
		c.proxyAuthKnown = true
	}
	return c.proxyAuth
}

// basicAuth is the Basic credentials of user (RFC 7617).
func basicAuth(user *url.Userinfo) string {
	pw, _ := user.Password()
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user.Username()+":"+pw))
}
