package h2

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/connactor/connactor/internal/errs"
	"github.com/connactor/connactor/internal/testkit/proxytest"
	"github.com/connactor/connactor/internal/testkit/realtest"
)

// A real nginx serving HTTP/2 over TLS on 127.0.0.1, started by the test with a
// certificate made by the test (internal/testkit/realtest).

// nginxH2 is a running nginx with HTTP/2 on.
type nginxH2 struct {
	addr string
	cert *proxytest.Cert
	log  string // the access log: "$connection $server_protocol $request"
}

// startNginxH2 starts nginx with HTTP/2 on and keepalive_requests, which makes
// it send GOAWAY after that many requests on a connection. Without nginx the
// test is skipped loudly, unless CI=true, where it fails.
func startNginxH2(t *testing.T, keepaliveRequests int) *nginxH2 {
	t.Helper()
	ng := realtest.StartNginx(t, realtest.NginxConfig{
		TLS:    true,
		HTTP2:  true,
		HTTP:   fmt.Sprintf("log_format h2 '$connection $server_protocol $request'; keepalive_requests %d;", keepaliveRequests),
		Server: `access_log access.log h2; location / { return 200 "ok"; }`,
	})
	return &nginxH2{addr: ng.Addr, cert: ng.Cert, log: ng.Path("access.log")}
}

// lines waits until the access log has n lines (nginx writes each after its
// response) and returns them.
func (n *nginxH2) lines(t *testing.T, want int) []string {
	t.Helper()
	return realtest.Lines(t, n.log, want)
}

func TestNginxServesHTTP2AndItsGoAwaysAreRetried(t *testing.T) {
	const requests, perConn = 10, 4
	n := startNginxH2(t, perConn)
	dial := func() (*Conn, *recorder) {
		tc, err := tls.Dial("tcp", n.addr, &tls.Config{RootCAs: n.cert.Pool, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		rec := newRecorder()
		return newConn(t, tc, Options{}, rec), rec
	}
	first, firstRec := dial()
	cur := first
	dials := 1
	for i := range requests {
		for attempt := 0; ; attempt++ {
			if cur.Streams().Available == 0 { // draining after nginx's GOAWAY
				cur, _ = dial()
				dials++
			}
			_, body, err := get(t, cur, "https://"+n.addr+"/")
			if err == nil {
				if body != "ok" {
					t.Fatalf("request %d: body %q", i, body)
				}
				break
			}
			if !errors.Is(err, errs.ErrNotSent) || attempt > 0 {
				t.Fatalf("request %d, attempt %d: %v", i, attempt, err)
			}
		}
	}

	if got := waitFor(t, firstRec.draining, "Draining of the first connection"); got != ReasonGoAway {
		t.Errorf("first connection: Draining(%q), want goaway", got)
	}
	if got := waitFor(t, firstRec.closed, "Closed of the first connection"); got.reason != ReasonGoAway {
		t.Errorf("first connection: Closed(%q, %v), want goaway", got.reason, got.err)
	}
	lines := n.lines(t, requests)
	conns := map[string]bool{}
	for _, l := range lines {
		f := strings.Fields(l) // $connection $server_protocol $request
		if len(f) < 2 || f[1] != "HTTP/2.0" {
			t.Errorf("access log line %q, want HTTP/2.0", l)
			continue
		}
		conns[f[0]] = true
	}
	if len(lines) != requests || len(conns) < requests/perConn+1 || len(conns) != dials {
		t.Errorf("nginx logged %d requests on %d connections, the client dialled %d:\n%s",
			len(lines), len(conns), dials, strings.Join(lines, "\n"))
	}
}
