package client

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A full httptrace.ClientTrace sees the same hooks, in the same order, from
// connactor as from net/http's Transport: a new TLS connection (dial and
// handshake hooks reach the request that caused the dial), a 103 before the
// final response, then a re-used idle connection.
func TestClientTraceFiresNetHTTPHooksInNetHTTPOrder(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		io.WriteString(w, "ok")
	}))
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	tlsCfg := &tls.Config{RootCAs: roots}

	run := func(rt http.RoundTripper) ([]string, *traceLog) {
		var tl traceLog
		for i := 0; i < 2; i++ {
			req, err := http.NewRequest("GET", srv.URL+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rt.RoundTrip(tl.traced(req))
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(b) != "ok" {
				t.Fatalf("request %d: %q, %v", i+1, b, err)
			}
			tl.add("-- response read")
		}
		return tl.list(), &tl
	}

	c, err := New(Config{TLSConfig: tlsCfg, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, gotLog := run(c)

	tr := &http.Transport{TLSClientConfig: tlsCfg}
	defer tr.CloseIdleConnections()
	want, _ := run(tr)

	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("connactor's hooks:\n\t%s\nnet/http's hooks:\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	for _, must := range []string{"ConnectStart tcp", "TLSHandshakeDone err=<nil>", "GotConn reused=true wasIdle=true",
		"Got1xxResponse 103", "PutIdleConn err=<nil>", "GotFirstResponseByte", "WroteHeaders", "WroteRequest err=<nil>"} {
		if !contains(got, must) {
			t.Errorf("connactor's hooks lack %q", must)
		}
	}
	if gc := gotLog.conns(); len(gc) != 2 || gc[1].IdleTime <= 0 {
		t.Errorf("GotConn infos %+v; want the second with an idle time", gc)
	}
}
