package client

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// newSecureTestClient starts a client for cfg and closes it at the test's end.
func newSecureTestClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// secureGet sends a GET for url with ctx and returns the status and body.
func secureGet(ctx context.Context, c *Client, url string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// mustGet is secureGet that fails the test on an error or a status other than 200.
func mustGet(t *testing.T, ctx context.Context, c *Client, url string) string {
	t.Helper()
	code, body, err := secureGet(ctx, c, url)
	if err != nil {
		t.Fatal(err)
	}
	if code != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, code)
	}
	return body
}

// connCounter counts, on the server's side, the connections a test server
// accepted and the Proxy-Authorization headers its requests carried.
type connCounter struct {
	mu        sync.Mutex
	conns     int
	requests  int
	proxyAuth int
}

func (cc *connCounter) connState(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		cc.mu.Lock()
		cc.conns++
		cc.mu.Unlock()
	}
}

func (cc *connCounter) snapshot() (conns, requests, proxyAuth int) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.conns, cc.requests, cc.proxyAuth
}

// countingServer returns an unstarted server answering "ok" that counts into cc.
func countingServer(cc *connCounter) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cc.mu.Lock()
		cc.requests++
		if r.Header.Get("Proxy-Authorization") != "" {
			cc.proxyAuth++
		}
		cc.mu.Unlock()
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = cc.connState
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected
	return srv
}
