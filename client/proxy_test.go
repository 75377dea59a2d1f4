package client

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/connactor/connactor/internal/testkit/calls"

	"github.com/connactor/connactor/internal/testkit/proxytest"
)

func TestHTTPThroughAnHTTPProxyUsesAbsoluteFormOnOneProxyConnection(t *testing.T) {
	cc := &connCounter{}
	target := countingServer(cc)
	target.Start()
	defer target.Close()
	p := proxytest.NewHTTPProxy(proxytest.WithAuth("alice", "s3cret"))
	defer p.Close()
	c := newClient(t, Config{Proxy: http.ProxyURL(p.URLWithUser("alice", "s3cret"))})

	for i := 0; i < 5; i++ {
		req, _ := http.NewRequest("GET", target.URL+"/item?i="+strconv.Itoa(i), nil)
		resp, err := c.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) // read to EOF: the connection goes back at once
		resp.Body.Close()
		if resp.StatusCode != 200 || req.Header.Get("Proxy-Authorization") != "" {
			t.Fatalf("status %d; caller's headers %v (must not be changed)", resp.StatusCode, req.Header)
		}
	}
	seen := p.Seen()
	if p.Conns() != 1 || len(seen) != 5 {
		t.Fatalf("proxy saw %d requests on %d connections, want 5 on 1", len(seen), p.Conns())
	}
	for i, s := range seen {
		want := target.URL + "/item?i=" + strconv.Itoa(i)
		if s.Method != "GET" || s.RequestURI != want || s.ProxyAuth != "Basic YWxpY2U6czNjcmV0" {
			t.Fatalf("request %d reached the proxy as %+v, want absolute-form %s with Basic credentials", i, s, want)
		}
	}
	st := c.Stats()
	if len(st.Routes) != 1 || !strings.Contains(st.Routes[0].Route, " via "+p.URL.String()) ||
		strings.Contains(st.Routes[0].Route, "s3cret") || strings.Contains(st.Routes[0].Route, "alice") {
		t.Fatalf("routes %+v: want one route naming the proxy, without its credentials", st.Routes)
	}
}

func TestAProxyAskingForCredentialsOnAPlainHTTPRequestIsAResponse(t *testing.T) {
	// As with net/http: in absolute-form the proxy answers the request itself,
	// and its 407 is the response (with Proxy-Authenticate) for the caller.
	p := proxytest.NewHTTPProxy(proxytest.WithAuth("alice", "s3cret"))
	defer p.Close()
	c := newClient(t, Config{Proxy: http.ProxyURL(p.URL)})
	code, _, err := calls.Get(context.Background(), c, "http://origin.test/")
	if err != nil || code != http.StatusProxyAuthRequired {
		t.Fatalf("status %d, err %v; want the proxy's 407", code, err)
	}
}

func TestHTTPSThroughConnectReusesOneTunnel(t *testing.T) {
	cc, hl := &connCounter{}, &handshakeLog{}
	target, roots := tlsServer(t, cc, hl)
	p := proxytest.NewHTTPProxy(proxytest.WithAuth("alice", "s3cret"))
	defer p.Close()
	c := newClient(t, Config{
		Proxy:     http.ProxyURL(p.URLWithUser("alice", "s3cret")),
		TLSConfig: &tls.Config{RootCAs: roots},
	})
	for i := 0; i < 5; i++ {
		calls.MustGet(t, context.Background(), c, target.URL)
	}
	seen := p.Seen()
	if p.Conns() != 1 || len(seen) != 1 || seen[0].Method != "CONNECT" || seen[0].ProxyAuth == "" {
		t.Fatalf("proxy saw %+v on %d connections, want one authenticated CONNECT", seen, p.Conns())
	}
	conns, requests, proxyAuth := cc.snapshot()
	if conns != 1 || requests != 5 || proxyAuth != 0 {
		t.Fatalf("target saw %d requests on %d connections, %d with Proxy-Authorization; want 5 on 1, none",
			requests, conns, proxyAuth)
	}
}

func TestAProxyRefusingConnectIsATypedError(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  proxytest.Option
		code int
	}{
		{"407 without credentials", proxytest.WithAuth("alice", "s3cret"), 407},
		{"502 from the proxy", proxytest.WithConnectStatus(502), 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proxytest.NewHTTPProxy(tc.opt)
			defer p.Close()
			c := newClient(t, Config{Proxy: http.ProxyURL(p.URL)})
			_, _, err := calls.Get(context.Background(), c, "https://origin.test/")
			var pce *ProxyConnectError
			if !errors.As(err, &pce) || pce.StatusCode != tc.code || pce.Proxy != p.URL.String() {
				t.Fatalf("err = %v, want a *ProxyConnectError with status %d from %s", err, tc.code, p.URL)
			}
		})
	}
}

func TestHTTPSProxyCarriesHTTPAndHTTPSTargets(t *testing.T) {
	cc, hl := &connCounter{}, &handshakeLog{}
	secure, roots := tlsServer(t, cc, hl)
	plainCount := &connCounter{}
	plain := countingServer(plainCount)
	plain.Start()
	defer plain.Close()
	cert := proxytest.NewCert()
	p := proxytest.NewHTTPSProxy(cert.TLS, proxytest.WithAuth("alice", "s3cret"))
	defer p.Close()
	both := roots.Clone()
	both.AppendCertsFromPEM(cert.CertPEM)
	c := newClient(t, Config{
		Proxy:     http.ProxyURL(p.URLWithUser("alice", "s3cret")),
		TLSConfig: &tls.Config{RootCAs: both},
	})
	for i := 0; i < 3; i++ {
		calls.MustGet(t, context.Background(), c, plain.URL)
		calls.MustGet(t, context.Background(), c, secure.URL)
	}
	if p.Conns() != 2 {
		t.Fatalf("proxy saw %d TLS connections, want 2 (one per route)", p.Conns())
	}
	if conns, requests, proxyAuth := cc.snapshot(); conns != 1 || requests != 3 || proxyAuth != 0 {
		t.Fatalf("HTTPS target saw %d requests on %d connections, %d with Proxy-Authorization", requests, conns, proxyAuth)
	}

	untrusting := newClient(t, Config{
		Proxy:     http.ProxyURL(p.URLWithUser("alice", "s3cret")),
		TLSConfig: &tls.Config{RootCAs: roots},
	})
	var verr *tls.CertificateVerificationError
	if _, _, err := calls.Get(context.Background(), untrusting, plain.URL); !errors.As(err, &verr) {
		t.Fatalf("through an untrusted https proxy: err = %v, want a certificate verification error", err)
	}
}

func TestSOCKS5ProxyCarriesHTTPAndHTTPSTargets(t *testing.T) {
	cc, hl := &connCounter{}, &handshakeLog{}
	secure, roots := tlsServer(t, cc, hl)
	plainCount := &connCounter{}
	plain := countingServer(plainCount)
	plain.Start()
	defer plain.Close()
	s := proxytest.NewSOCKS5("alice", "s3cret")
	defer s.Close()
	pu := &url.URL{Scheme: "socks5", Host: s.Addr, User: url.UserPassword("alice", "s3cret")}
	c := newClient(t, Config{Proxy: http.ProxyURL(pu), TLSConfig: &tls.Config{RootCAs: roots}})
	for i := 0; i < 3; i++ {
		calls.MustGet(t, context.Background(), c, plain.URL)
		calls.MustGet(t, context.Background(), c, secure.URL)
	}
	if s.Conns() != 2 || len(s.Targets()) != 2 {
		t.Fatalf("SOCKS5 proxy saw %d connections for %v, want 2 (one per route)", s.Conns(), s.Targets())
	}
	_, _, pa1 := plainCount.snapshot()
	conns, requests, pa2 := cc.snapshot()
	if conns != 1 || requests != 3 || pa1+pa2 != 0 {
		t.Fatalf("HTTPS target saw %d requests on %d connections; targets saw %d Proxy-Authorization headers",
			requests, conns, pa1+pa2)
	}

	wrong := &url.URL{Scheme: "socks5", Host: s.Addr, User: url.UserPassword("alice", "guess")}
	bad := newClient(t, Config{Proxy: http.ProxyURL(wrong)})
	if _, _, err := calls.Get(context.Background(), bad, plain.URL); err == nil || strings.Contains(err.Error(), "guess") {
		t.Fatalf("wrong SOCKS5 password: err = %v, want a failure that does not show the password", err)
	}
}

func TestProxyCredentialsDoNotMixAcrossRoutes(t *testing.T) {
	// Two credentials for one proxy are two routes: a tunnel authorised for
	// alice is never used for bob's requests.
	cc, hl := &connCounter{}, &handshakeLog{}
	target, roots := tlsServer(t, cc, hl)
	p := proxytest.NewHTTPProxy()
	defer p.Close()
	users := map[string]*url.URL{"alice": p.URLWithUser("alice", "a"), "bob": p.URLWithUser("bob", "b")}
	c := newClient(t, Config{
		Proxy: func(r *http.Request) (*url.URL, error) {
			return users[r.Header.Get("X-User")], nil
		},
		TLSConfig:        &tls.Config{RootCAs: roots},
		MaxConnsPerRoute: 1,
	})
	for i := 0; i < 3; i++ {
		for _, u := range []string{"alice", "bob"} {
			req, _ := http.NewRequest("GET", target.URL, nil)
			req.Header.Set("X-User", u)
			resp, err := c.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	seen := p.Seen()
	if len(seen) != 2 || seen[0].ProxyAuth == seen[1].ProxyAuth || p.Conns() != 2 {
		t.Fatalf("proxy saw %+v on %d connections, want one CONNECT per credential", seen, p.Conns())
	}
	if st := c.Stats(); len(st.Routes) != 2 {
		t.Fatalf("routes %+v, want 2", st.Routes)
	}
}
