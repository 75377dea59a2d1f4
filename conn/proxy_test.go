package conn

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/proxytest"
	"github.com/connactor/connactor/route"
)

// proxiedKey routes target through proxyURL as the client does, remembering the
// proxy's credentials in creds.
func proxiedKey(t *testing.T, target string, proxyURL *url.URL, creds *route.Credentials) route.Key {
	t.Helper()
	req, err := http.NewRequest("GET", target, nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := route.FromRequest(req, "", route.Options{Proxy: http.ProxyURL(proxyURL), Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testOptions(roots *x509.CertPool, creds *route.Credentials) *Options {
	return &Options{
		DialTimeout:      5 * time.Second,
		TLSConfig:        &tls.Config{RootCAs: roots},
		ProxyCredentials: creds,
		Go:               func(f func()) { go f() }, // unused by dial
		Logger:           slog.New(slog.DiscardHandler),
	}
}

// getOn writes a GET for target on nc (origin-form) and returns the response body.
func getOn(t *testing.T, nc net.Conn, target string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", target, nil)
	if err := req.Write(nc); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// headerRecorder is a handler that answers "ok" and remembers the
// Proxy-Authorization headers it was sent.
type headerRecorder struct {
	mu        sync.Mutex
	requests  int
	proxyAuth []string
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests++
	if v := r.Header.Get("Proxy-Authorization"); v != "" {
		h.proxyAuth = append(h.proxyAuth, v)
	}
	h.mu.Unlock()
	io.WriteString(w, "ok")
}

func (h *headerRecorder) counts() (int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.requests, append([]string(nil), h.proxyAuth...)
}

func TestConnectTunnelGivesCredentialsToTheProxyOnly(t *testing.T) {
	rec := &headerRecorder{}
	target := httptest.NewTLSServer(rec)
	defer target.Close()
	p := proxytest.NewHTTPProxy(proxytest.WithAuth("alice", "s3cret"))
	defer p.Close()
	roots := x509.NewCertPool()
	roots.AddCert(target.Certificate())
	creds := &route.Credentials{}
	k := proxiedKey(t, target.URL, p.URLWithUser("alice", "s3cret"), creds)

	nc, err := dial(context.Background(), k, testOptions(roots, creds))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, ok := nc.(*tls.Conn); !ok {
		t.Fatalf("dial returned %T, want TLS to the target over the tunnel", nc)
	}
	if got := getOn(t, nc, target.URL); got != "ok" {
		t.Fatalf("body %q", got)
	}
	seen := p.Seen()
	if len(seen) != 1 || seen[0].Method != "CONNECT" || seen[0].RequestURI != k.Addr() {
		t.Fatalf("proxy saw %+v, want one CONNECT %s", seen, k.Addr())
	}
	if want := "Basic YWxpY2U6czNjcmV0"; seen[0].ProxyAuth != want {
		t.Fatalf("CONNECT carried Proxy-Authorization %q, want %q", seen[0].ProxyAuth, want)
	}
	if n, auth := rec.counts(); n != 1 || len(auth) != 0 {
		t.Fatalf("target saw %d requests with Proxy-Authorization %q, want 1 and none", n, auth)
	}
}

func TestRefusedConnectIsAProxyConnectErrorNamingTheStatus(t *testing.T) {
	for _, tc := range []struct {
		name       string
		opts       []proxytest.Option
		user, pass string
		code       int
	}{
		{"no credentials", []proxytest.Option{proxytest.WithAuth("alice", "s3cret")}, "", "", 407},
		{"wrong credentials", []proxytest.Option{proxytest.WithAuth("alice", "s3cret")}, "alice", "guess", 407},
		{"unreachable target", []proxytest.Option{proxytest.WithConnectStatus(502)}, "", "", 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proxytest.NewHTTPProxy(tc.opts...)
			defer p.Close()
			pu := p.URL
			if tc.user != "" {
				pu = p.URLWithUser(tc.user, tc.pass)
			}
			creds := &route.Credentials{}
			k := proxiedKey(t, "https://origin.test/", pu, creds)
			_, err := dial(context.Background(), k, testOptions(nil, creds))
			var pce *ProxyConnectError
			if !errors.As(err, &pce) {
				t.Fatalf("err = %v (%T), want a *ProxyConnectError", err, err)
			}
			if pce.StatusCode != tc.code || pce.Proxy != k.Proxy || pce.Target != "origin.test:443" {
				t.Fatalf("got %+v, want status %d from %s for origin.test:443", pce, tc.code, k.Proxy)
			}
			if !strings.Contains(err.Error(), http.StatusText(tc.code)) || strings.Contains(err.Error(), "guess") {
				t.Fatalf("error %q should name the status and never the password", err)
			}
		})
	}
}

// silentListener accepts connections and never answers; Close releases them.
func silentListener(t *testing.T, answer string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned by the test: ends when the listener closes
		defer wg.Done()
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			if answer != "" {
				io.WriteString(c, answer)
			}
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln
}

func TestConnectIsBoundedByTheDialContext(t *testing.T) {
	ln := silentListener(t, "")
	k := proxiedKey(t, "https://origin.test/", &url.URL{Scheme: "http", Host: ln.Addr().String()}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := dial(ctx, k, testOptions(nil, nil))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the dial context's deadline", err)
	}
}

func TestBytesAfterTheConnectAnswerAreAProtocolError(t *testing.T) {
	ln := silentListener(t, "HTTP/1.1 200 Connection established\r\n\r\nnot a TLS record")
	k := proxiedKey(t, "https://origin.test/", &url.URL{Scheme: "http", Host: ln.Addr().String()}, nil)
	_, err := dial(context.Background(), k, testOptions(nil, nil))
	if !errors.Is(err, ErrProxyProtocol) {
		t.Fatalf("err = %v, want ErrProxyProtocol", err)
	}
}

func TestHTTPSProxyIsReachedOverTLSBeforeTheTunnel(t *testing.T) {
	rec := &headerRecorder{}
	target := httptest.NewTLSServer(rec)
	defer target.Close()
	cert := proxytest.NewCert()
	p := proxytest.NewHTTPSProxy(cert.TLS, proxytest.WithAuth("alice", "s3cret"))
	defer p.Close()
	roots := cert.Pool.Clone()
	roots.AddCert(target.Certificate())
	creds := &route.Credentials{}
	k := proxiedKey(t, target.URL, p.URLWithUser("alice", "s3cret"), creds)
	if !strings.HasPrefix(k.Proxy, "https://") {
		t.Fatalf("key proxy %q", k.Proxy)
	}
	nc, err := dial(context.Background(), k, testOptions(roots, creds))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := getOn(t, nc, target.URL); got != "ok" {
		t.Fatalf("body %q", got)
	}
	if seen := p.Seen(); len(seen) != 1 || seen[0].Method != "CONNECT" {
		t.Fatalf("proxy saw %+v", seen)
	}

	// The proxy's certificate is verified like any server's.
	_, err = dial(context.Background(), k, testOptions(x509.NewCertPool(), creds))
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("dial through an untrusted https proxy: err = %v, want a certificate verification error", err)
	}
}

func TestHTTPTargetsThroughAnHTTPProxyUseThePlainProxyConnection(t *testing.T) {
	target := httptest.NewServer(&headerRecorder{})
	defer target.Close()
	p := proxytest.NewHTTPProxy()
	defer p.Close()
	k := proxiedKey(t, target.URL+"/x", p.URL, nil)
	if !k.AbsoluteForm() {
		t.Fatalf("key %s: want absolute-form", k)
	}
	nc, err := dial(context.Background(), k, testOptions(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	req, _ := http.NewRequest("GET", target.URL+"/x", nil)
	if err := req.WriteProxy(nc); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen := p.Seen(); len(seen) != 1 || seen[0].Method != "GET" || seen[0].RequestURI != target.URL+"/x" {
		t.Fatalf("proxy saw %+v, want only the absolute-form GET (no CONNECT)", seen)
	}
}

func TestSOCKS5ProxyRelaysWithUsernameAndPassword(t *testing.T) {
	rec := &headerRecorder{}
	target := httptest.NewTLSServer(rec)
	defer target.Close()
	s := proxytest.NewSOCKS5("alice", "s3cret")
	defer s.Close()
	roots := x509.NewCertPool()
	roots.AddCert(target.Certificate())
	creds := &route.Credentials{}
	pu := &url.URL{Scheme: "socks5", Host: s.Addr, User: url.UserPassword("alice", "s3cret")}
	k := proxiedKey(t, target.URL, pu, creds)

	nc, err := dial(context.Background(), k, testOptions(roots, creds))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := getOn(t, nc, target.URL); got != "ok" {
		t.Fatalf("body %q", got)
	}
	if got := s.Targets(); len(got) != 1 || got[0] != k.Addr() {
		t.Fatalf("SOCKS5 proxy was asked for %q, want [%s]", got, k.Addr())
	}
	if _, auth := rec.counts(); len(auth) != 0 {
		t.Fatalf("target saw Proxy-Authorization %q", auth)
	}

	bad := proxiedKey(t, target.URL, &url.URL{Scheme: "socks5", Host: s.Addr, User: url.UserPassword("alice", "guess")}, creds)
	if _, err := dial(context.Background(), bad, testOptions(roots, creds)); err == nil || strings.Contains(err.Error(), "guess") {
		t.Fatalf("dial with a wrong SOCKS5 password: err = %v, want a failure that does not show the password", err)
	}
}

// dial is dialTimed without timings, as the tests call it.
func dial(ctx context.Context, k route.Key, opt *Options) (net.Conn, error) {
	return dialTimed(ctx, k, k.Addr(), opt, nil)
}
