package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/connactor/connactor/internal/testkit/calls"

	"github.com/connactor/connactor/internal/testkit/proxytest"
)

// handshakeLog records, on the server's side, every TLS handshake and whether
// it resumed a session.
type handshakeLog struct {
	mu      sync.Mutex
	resumed []bool
}

func (h *handshakeLog) verify(cs tls.ConnectionState) error {
	h.mu.Lock()
	h.resumed = append(h.resumed, cs.DidResume)
	h.mu.Unlock()
	return nil
}

func (h *handshakeLog) get() []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]bool(nil), h.resumed...)
}

// tlsServer starts an HTTPS server (httptest's certificate) that counts
// connections into cc and handshakes into hl, and returns the roots that trust it.
func tlsServer(t *testing.T, cc *connCounter, hl *handshakeLog) (*httptest.Server, *x509.CertPool) {
	t.Helper()
	srv := countingServer(cc)
	srv.TLS = &tls.Config{VerifyConnection: hl.verify}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	return srv, roots
}

func TestTenHTTPSRequestsUseOneTLSConnection(t *testing.T) {
	cc, hl := &connCounter{}, &handshakeLog{}
	srv, roots := tlsServer(t, cc, hl)
	c := newClient(t, Config{TLSConfig: &tls.Config{RootCAs: roots}})
	for i := 0; i < 10; i++ {
		calls.MustGet(t, context.Background(), c, srv.URL)
	}
	conns, requests, _ := cc.snapshot()
	if conns != 1 || requests != 10 || len(hl.get()) != 1 {
		t.Fatalf("server saw %d connections, %d handshakes for %d requests; want 1, 1, 10", conns, len(hl.get()), requests)
	}
}

func TestSelfSignedServerIsRefusedByDefaultAndAcceptedWithItsRoots(t *testing.T) {
	cc, hl := &connCounter{}, &handshakeLog{}
	srv, roots := tlsServer(t, cc, hl)

	def := newClient(t, Config{})
	_, _, err := calls.Get(context.Background(), def, srv.URL)
	var verr *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &verr) || !errors.As(err, &unknown) {
		t.Fatalf("default config: err = %v, want a certificate verification error (unknown authority)", err)
	}
	if _, requests, _ := cc.snapshot(); requests != 0 {
		t.Fatalf("server answered %d requests on an unverified connection", requests)
	}

	trusting := newClient(t, Config{TLSConfig: &tls.Config{RootCAs: roots}})
	if body := calls.MustGet(t, context.Background(), trusting, srv.URL); body != "ok" {
		t.Fatalf("body %q", body)
	}
}

func TestSecondConnectionToTheSameHostResumesTheTLSSession(t *testing.T) {
	cc, hl := &connCounter{}, &handshakeLog{}
	srv, roots := tlsServer(t, cc, hl)
	c := newClient(t, Config{TLSConfig: &tls.Config{RootCAs: roots}})
	// Connection: close makes the first connection end after its response, whose
	// read also took in the server's session ticket (TLS 1.3 sends it after the
	// handshake); the second request needs a new connection.
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Close = true
	resp, err := c.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	calls.MustGet(t, context.Background(), c, srv.URL)

	if conns, _, _ := cc.snapshot(); conns != 2 {
		t.Fatalf("server saw %d connections, want 2", conns)
	}
	if got := hl.get(); len(got) != 2 || got[0] || !got[1] {
		t.Fatalf("handshakes resumed %v, want [false true]", got)
	}
}

func TestTLSConfigIsHonoured(t *testing.T) {
	clientCert := proxytest.NewCert()
	cc, hl := &connCounter{}, &handshakeLog{}
	srv := countingServer(cc)
	srv.TLS = &tls.Config{VerifyConnection: hl.verify, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: clientCert.Pool, MaxVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"client certificate", &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientCert.TLS}}, true},
		{"no client certificate", &tls.Config{RootCAs: roots}, false},
		{"server name the certificate names", &tls.Config{RootCAs: roots, ServerName: "example.com",
			Certificates: []tls.Certificate{clientCert.TLS}}, true},
		{"server name the certificate does not name", &tls.Config{RootCAs: roots, ServerName: "other.example",
			Certificates: []tls.Certificate{clientCert.TLS}}, false},
		{"minimum version above the server's", &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13,
			Certificates: []tls.Certificate{clientCert.TLS}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, Config{TLSConfig: tc.cfg})
			_, before, _ := cc.snapshot()
			code, _, err := calls.Get(context.Background(), c, srv.URL)
			_, after, _ := cc.snapshot()
			if tc.ok && (err != nil || code != 200 || after != before+1) {
				t.Fatalf("status %d, err %v; want 200", code, err)
			}
			if !tc.ok && (err == nil || after != before) {
				t.Fatalf("status %d, err %v, server answered %d requests; want a TLS failure and none", code, err, after-before)
			}
		})
	}
}

func TestTLSHandshakeTimeoutBoundsASilentServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() { // owned by the test: ends when ln closes
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	defer func() {
		ln.Close()
		select {
		case c := <-accepted:
			c.Close()
		default:
		}
	}()
	c := newClient(t, Config{TLSHandshakeTimeout: 100 * time.Millisecond})
	_, _, err = calls.Get(context.Background(), c, "https://"+ln.Addr().String())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the handshake's deadline", err)
	}
}

// ALPN offers what Protocols allows, whatever TLSConfig.NextProtos lists.
func TestALPNFollowsProtocolsWhateverTheConfigLists(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto)
	}))
	srv.EnableHTTP2 = true // the server would pick h2 if offered
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	var h1 http.Protocols
	h1.SetHTTP1(true)
	c := newClient(t, Config{Protocols: &h1, TLSConfig: &tls.Config{RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}}})
	if proto := calls.MustGet(t, context.Background(), c, srv.URL); proto != "HTTP/1.1" {
		t.Fatalf("server saw %q, want HTTP/1.1", proto)
	}
	c2 := newClient(t, Config{TLSConfig: &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}}})
	if proto := calls.MustGet(t, context.Background(), c2, srv.URL); proto != "HTTP/2.0" {
		t.Fatalf("by default the server saw %q, want HTTP/2.0", proto)
	}
}
