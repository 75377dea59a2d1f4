package real_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/connactor/connactor/conn"
	"github.com/connactor/connactor/conn/h2"
	"github.com/connactor/connactor/internal/testkit/realtest"
)

// One HTTP/2 connection of conn/h2 on its own (no pool around it) against a
// real nginx serving HTTP/2 over TLS, with a certificate made by the test.

// h2Events collects a Conn's events and checks their rules: Draining and
// Closed at most once, nothing after Closed, no flood of StreamsChanged.
type h2Events struct {
	streams  atomic.Int32
	draining chan h2.Reason
	closed   chan h2ClosedEvent
	over     atomic.Bool
}

// h2ClosedEvent is one Closed callback.
type h2ClosedEvent struct {
	reason h2.Reason
	err    error
}

func newH2Events(t *testing.T) (*h2Events, h2.Events) {
	r := &h2Events{draining: make(chan h2.Reason, 4), closed: make(chan h2ClosedEvent, 4)}
	after := func(what string) {
		if r.over.Load() {
			t.Errorf("%s reported after Closed", what)
		}
	}
	return r, h2.Events{
		StreamsChanged: func(h2.Streams) {
			after("StreamsChanged")
			if r.streams.Add(1) > 64 {
				t.Errorf("too many StreamsChanged events")
			}
		},
		Draining: func(reason h2.Reason) {
			after("Draining")
			if len(r.draining) > 0 {
				t.Errorf("Draining reported twice")
			}
			r.draining <- reason
		},
		Closed: func(reason h2.Reason, err error) {
			after("Closed")
			r.over.Store(true)
			r.closed <- h2ClosedEvent{reason, err}
		},
	}
}

// next returns the next value of ch, failing the test after 30 s.
func next[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("no %s within 30s", what)
		var zero T
		return zero
	}
}

// h2Get sends a GET for url on c and returns the body, closing it.
func h2Get(t *testing.T, c *h2.Conn, url string) (string, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.RoundTrip(req, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// nginx's keepalive_requests makes it send GOAWAY after that many requests on
// a connection: the Conn reports Draining and Closed with ReasonGoAway, a
// stream above the GOAWAY's last stream id fails with ErrNotSent, and sent
// again on a new connection it succeeds.
func TestNginxServesHTTP2AndItsGoAwaysAreRetried(t *testing.T) {
	t.Parallel()
	const requests, perConn = 10, 4
	ng := realtest.StartNginx(t, realtest.NginxConfig{
		TLS:    true,
		HTTP2:  true,
		HTTP:   fmt.Sprintf("log_format h2 '$connection $server_protocol $request'; keepalive_requests %d;", perConn),
		Server: `access_log access.log h2; location / { return 200 "ok"; }`,
	})
	dial := func(ev h2.Events) *h2.Conn {
		tc, err := tls.Dial("tcp", ng.Addr, &tls.Config{RootCAs: ng.Cert.Pool, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := h2.New(tc, h2.Options{Events: ev})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	firstRec, firstEvents := newH2Events(t)
	cur := dial(firstEvents)
	dials := 1
	for i := range requests {
		for attempt := 0; ; attempt++ {
			if cur.Streams().Available == 0 { // draining after nginx's GOAWAY
				_, ev := newH2Events(t)
				cur = dial(ev)
				dials++
			}
			body, err := h2Get(t, cur, "https://"+ng.Addr+"/")
			if err == nil {
				if body != "ok" {
					t.Fatalf("request %d: body %q", i, body)
				}
				break
			}
			if !errors.Is(err, conn.ErrNotSent) || attempt > 0 {
				t.Fatalf("request %d, attempt %d: %v", i, attempt, err)
			}
		}
	}

	if got := next(t, firstRec.draining, "Draining of the first connection"); got != h2.ReasonGoAway {
		t.Errorf("first connection: Draining(%q), want goaway", got)
	}
	if got := next(t, firstRec.closed, "Closed of the first connection"); got.reason != h2.ReasonGoAway {
		t.Errorf("first connection: Closed(%q, %v), want goaway", got.reason, got.err)
	}
	lines := realtest.Lines(t, ng.Path("access.log"), requests)
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
