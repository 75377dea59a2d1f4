package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// The errors code inspects through http.Client keep net/http's shapes.
func TestErrorsKeepNetHTTPShapesThroughHTTPClient(t *testing.T) {
	srv := newDispatchServer(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	c := newClient(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1, LeaseTimeout: 20 * time.Millisecond})
	hc := &http.Client{Transport: c}

	// One request holds the only connection; the next times out waiting.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/hold", nil)
	go hc.Do(holder)
	waitFor(t, "the connection leased", func() bool { return c.Stats().Leased == 1 })
	_, err := hc.Get(srv.URL + "/waits")
	var ue *url.Error
	if !errors.As(err, &ue) || !ue.Timeout() || !os.IsTimeout(err) {
		t.Fatalf("lease timeout through http.Client: %v (url.Error.Timeout and os.IsTimeout must hold)", err)
	}
	if !errors.Is(err, ErrLeaseTimeout) || !errors.Is(err, ErrNotSent) || !strings.Contains(err.Error(), srv.URL+"/waits") {
		t.Fatalf("lease timeout: %v", err)
	}

	// A caller whose context ends while it waits learns who it waited for.
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer wcancel()
	c2 := newClient(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1})
	go (&http.Client{Transport: c2}).Do(holder.Clone(ctx))
	waitFor(t, "the second client's connection leased", func() bool { return c2.Stats().Leased == 1 })
	req, _ := http.NewRequestWithContext(wctx, http.MethodGet, srv.URL+"/queued", nil)
	_, err = c2.RoundTrip(req)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNotSent) ||
		!strings.Contains(err.Error(), "connactor") || !strings.Contains(err.Error(), srv.URL+"/queued") ||
		!strings.Contains(err.Error(), "waiting for a connection") {
		t.Fatalf("context ended in the queue: %v", err)
	}

	for _, tc := range []struct {
		name, want string
		req        func() *http.Request
	}{
		{"scheme", `unsupported protocol scheme "ftp"`, func() *http.Request { r, _ := http.NewRequest("GET", "ftp://example.invalid/", nil); return r }},
		{"header value", `net/http: invalid header field value for "X-Evil"`, func() *http.Request {
			r, _ := http.NewRequest("GET", srv.URL, nil)
			r.Header.Set("X-Evil", "a\r\nInjected: 1")
			return r
		}},
		{"header name", `net/http: invalid header field name`, func() *http.Request {
			r, _ := http.NewRequest("GET", srv.URL, nil)
			r.Header["Bad Name"] = []string{"x"}
			return r
		}},
	} {
		_, err := hc.Do(tc.req())
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrNotSent) {
			t.Errorf("%s: %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
}

// Wrapped errors keep their cause: a reset connection is a *net.OpError, a
// refused dial too, each classified.
func TestErrorsKeepTheirCause(t *testing.T) {
	t.Run("reset after the request", func(t *testing.T) {
		h := newHarness(t, Config{}, func(c *rawConn) {
			if _, _, err := c.readRequest(); err != nil {
				return
			}
			c.Conn.(*net.TCPConn).SetLinger(0) // the handler's return closes with RST
		})
		_, _, err := h.do(h.newRequest("GET", "/reset", nil))
		var op *net.OpError
		var ee *ExchangeError
		if !errors.As(err, &op) || !errors.As(err, &ee) || !errors.Is(err, ErrOutcomeUnknown) {
			t.Fatalf("reset: %v (%T); want *net.OpError inside an ExchangeError, outcome unknown", err, err)
		}
		h.settle()
	})
	t.Run("refused dial", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens there now
		c := newClient(t, Config{})
		req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
		_, err = c.RoundTrip(req)
		var op *net.OpError
		var ee *ExchangeError
		if !errors.As(err, &op) || !errors.As(err, &ee) || ee.Op != "dial" || !errors.Is(err, ErrNotSent) {
			t.Fatalf("refused dial: %v; want *net.OpError in a dial ExchangeError, not sent", err)
		}
	})
	t.Run("context ended while waiting for a connection", func(t *testing.T) {
		h := newHarness(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1}, func(c *rawConn) {
			c.serve(func(int, *http.Request) string { return okResponse })
		})
		resp, err := h.c.RoundTrip(h.newRequest("GET", "/hold", nil)) // holds the only connection
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err = h.c.RoundTrip(h.newRequest("GET", "/wait", nil).WithContext(ctx))
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrNotSent) {
			t.Fatalf("lease wait past the deadline: %v; want DeadlineExceeded, not sent", err)
		}
		resp.Body.Close()
		h.settle()
	})
	t.Run("lease timeout", func(t *testing.T) {
		h := newHarness(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1, LeaseTimeout: 50 * time.Millisecond}, func(c *rawConn) {
			c.serve(func(int, *http.Request) string { return okResponse })
		})
		resp, err := h.c.RoundTrip(h.newRequest("GET", "/hold", nil))
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.c.RoundTrip(h.newRequest("GET", "/wait", nil))
		var ne net.Error
		if !errors.Is(err, ErrLeaseTimeout) || !errors.Is(err, ErrNotSent) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("lease timeout: %v; want ErrLeaseTimeout, a timeout, not sent", err)
		}
		resp.Body.Close()
		h.settle()
	})
}
