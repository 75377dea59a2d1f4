package client

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"sync"
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

	c := newClient(t, Config{TLSConfig: tlsCfg})
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

// traceLog records httptrace hooks in order.
type traceLog struct {
	mu      sync.Mutex
	events  []string
	gotConn []httptrace.GotConnInfo
}

func (l *traceLog) add(format string, args ...any) {
	l.mu.Lock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *traceLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

func (l *traceLog) conns() []httptrace.GotConnInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]httptrace.GotConnInfo(nil), l.gotConn...)
}

// trace returns a ClientTrace with every hook net/http fires, recording into l.
func (l *traceLog) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GetConn: func(string) { l.add("GetConn") },
		GotConn: func(i httptrace.GotConnInfo) {
			l.mu.Lock()
			l.gotConn = append(l.gotConn, i)
			l.mu.Unlock()
			l.add("GotConn reused=%v wasIdle=%v", i.Reused, i.WasIdle)
		},
		PutIdleConn:          func(err error) { l.add("PutIdleConn err=%v", err) },
		GotFirstResponseByte: func() { l.add("GotFirstResponseByte") },
		Got100Continue:       func() { l.add("Got100Continue") },
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error {
			l.add("Got1xxResponse %d", code)
			return nil
		},
		DNSStart:          func(httptrace.DNSStartInfo) { l.add("DNSStart") },
		DNSDone:           func(httptrace.DNSDoneInfo) { l.add("DNSDone") },
		ConnectStart:      func(network, _ string) { l.add("ConnectStart %s", network) },
		ConnectDone:       func(network, _ string, err error) { l.add("ConnectDone %s err=%v", network, err) },
		TLSHandshakeStart: func() { l.add("TLSHandshakeStart") },
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			l.add("TLSHandshakeDone err=%v", err)
		},
		WroteHeaderField: func(string, []string) {},
		WroteHeaders:     func() { l.add("WroteHeaders") },
		Wait100Continue:  func() { l.add("Wait100Continue") },
		WroteRequest:     func(i httptrace.WroteRequestInfo) { l.add("WroteRequest err=%v", i.Err) },
	}
}

// traced returns req with the recording trace in its context.
func (l *traceLog) traced(req *http.Request) *http.Request {
	return req.WithContext(httptrace.WithClientTrace(req.Context(), l.trace()))
}
