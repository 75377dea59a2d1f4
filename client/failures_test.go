package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Failures on pooled connections: retries only when safe, typed errors, and a
// pool that is never poisoned.

// onlyReader hides strings.Reader so that http.NewRequest cannot set GetBody:
// the body is not replayable.
type onlyReader struct{ io.Reader }

// The server answers the first request on its first connection, then reads the
// second request and closes without answering.
func dropSecondRequestOnFirstConn(c *rawConn) {
	for n := 1; ; n++ {
		if _, _, err := c.readRequest(); err != nil {
			return
		}
		if c.id == 1 && n == 2 {
			return // close without a byte of answer
		}
		if c.write(okResponse) != nil {
			return
		}
	}
}

func TestGetIsRetriedOnNewConnectionAfterServerDropsReusedOne(t *testing.T) {
	h := newHarness(t, Config{}, dropSecondRequestOnFirstConn)
	h.mustGet("/1", "ok")
	var tl traceLog
	resp, body, err := h.do(tl.traced(h.newRequest("GET", "/2", nil)))
	if err != nil || resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("GET /2: %v %q %v; want 200 ok after one retry", resp, body, err)
	}
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c1 GET /2", "c2 GET /2")
	gc := tl.conns()
	if len(gc) != 2 || !gc[0].Reused || gc[1].Reused {
		t.Errorf("GotConn: %+v; want a re-used connection, then a new one", gc)
	}
	h.settle()
}

func TestNonReplayablePostReachesServerAtMostOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		body func() io.Reader
	}{
		{"body without GetBody", func() io.Reader { return onlyReader{strings.NewReader("payload")} }},
		{"replayable body, non-idempotent method", func() io.Reader { return strings.NewReader("payload") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{}, dropSecondRequestOnFirstConn)
			h.mustGet("/1", "ok")
			_, _, err := h.do(h.newRequest("POST", "/pay", tc.body()))
			if !errors.Is(err, ErrOutcomeUnknown) || errors.Is(err, ErrNotSent) {
				t.Fatalf("POST on a connection dropped mid-request: %v; want ErrOutcomeUnknown only", err)
			}
			wantLog(t, h.srv.requestLog(), "c1 GET /1", "c1 POST /pay")
			if d := h.dials.Load(); d != 1 {
				t.Errorf("%d dials; the POST must not have been retried on a new connection", d)
			}
			h.settle()
		})
	}
}

func TestPostWithIdempotencyKeyIsRetried(t *testing.T) {
	h := newHarness(t, Config{}, dropSecondRequestOnFirstConn)
	h.mustGet("/1", "ok")
	req := h.newRequest("POST", "/pay", strings.NewReader("payload"))
	req.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
	if _, body, err := h.do(req); err != nil || body != "ok" {
		t.Fatalf("keyed POST: %q, %v; want ok after one retry", body, err)
	}
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c1 POST /pay", "c2 POST /pay")
	h.settle()
}

// The server closes each connection 50ms after answering; a request 300ms later
// must find that out before writing: the idle watch removed the connection.
// (On the in-memory network, in a testing/synctest bubble: the watch is the
// only way to find out, and the waits take no real time.)
func TestServerClosingIdleConnectionIsNoticedBeforeReuse(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h := newMemHarness(t, Config{}, func(c *rawConn) {
			if _, _, err := c.readRequest(); err != nil {
				return
			}
			c.write(okResponse)
			time.Sleep(50 * time.Millisecond) // the server's timing is the subject
		})
		h.mustGet("/1", "ok")
		time.Sleep(300 * time.Millisecond)
		var tl traceLog
		if _, body, err := h.do(tl.traced(h.newRequest("GET", "/2", nil))); err != nil || body != "ok" {
			t.Fatalf("GET /2: %q, %v", body, err)
		}
		if gc := tl.conns(); len(gc) != 1 || gc[0].Reused {
			t.Errorf("GotConn: %+v; want one, on a new connection", gc)
		}
		wantLog(t, h.srv.requestLog(), "c1 GET /1", "c2 GET /2")
		if n := h.closedBy("server_close"); n != 1 {
			t.Errorf("closed after the server's close: %d, want 1 (%+v)", n, h.c.Stats().Routes)
		}
		h.settle()
	})
}

func TestGarbageStatusLineDiscardsConnection(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			if c.id == 1 {
				return "SSH-2.0-OpenSSH_9.6 garbage\r\n\r\n"
			}
			return okResponse
		})
	})
	_, _, err := h.do(h.newRequest("GET", "/1", nil))
	var ee *ExchangeError
	if !errors.As(err, &ee) || !ee.GotByte || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("garbage status line: %v; want an ExchangeError after response bytes", err)
	}
	h.mustGet("/2", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c2 GET /2")
	h.settle()
}

func TestBadContentLengthDiscardsConnection(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			if c.id == 1 {
				return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!"
			}
			return okResponse
		})
	})
	if _, _, err := h.do(h.newRequest("GET", "/1", nil)); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("conflicting Content-Length: %v; want an error", err)
	}
	h.mustGet("/2", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c2 GET /2")
	h.settle()
}

// A 16 MiB header is refused after MaxResponseHeaderBytes (1 MiB by default):
// the client stops reading there.
func TestHugeResponseHeaderIsRefusedQuickly(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			if c.id == 1 {
				return "HTTP/1.1 200 OK\r\nX-Huge: " + strings.Repeat("h", 16<<20) + "\r\nContent-Length: 2\r\n\r\nok"
			}
			return okResponse
		})
	})
	_, _, err := h.do(h.newRequest("GET", "/1", nil))
	if !errors.Is(err, ErrResponseHeaderTooLarge) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("16 MiB header: %v; want ErrResponseHeaderTooLarge", err)
	}
	if n := h.bytesRead.Load(); n > DefaultMaxResponseHeaderBytes+64<<10 {
		t.Errorf("client read %d bytes of a 16 MiB header; the limit is %d", n, DefaultMaxResponseHeaderBytes)
	}
	h.mustGet("/2", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c2 GET /2")
	h.settle()
}

func TestHeaderWithCRLFIsRefusedWithNothingSent(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string { return okResponse })
	})
	for _, tc := range []struct{ name, value string }{
		{"X-Evil", "a\r\nInjected: yes"},
		{"X-Evil", "a\nInjected: yes"},
		{"X-Bad\r\nName", "v"},
		{"X-Nul", "a\x00b"},
	} {
		req := h.newRequest("GET", "/evil", nil)
		req.Header[tc.name] = []string{tc.value}
		_, err := h.c.RoundTrip(req)
		if !errors.Is(err, ErrInvalidRequest) || !errors.Is(err, ErrNotSent) {
			t.Errorf("header %q: %q: %v; want ErrInvalidRequest and ErrNotSent", tc.name, tc.value, err)
		}
	}
	if n, a := h.srv.bytesIn.Load(), h.srv.accepted(); n != 0 || a != 0 {
		t.Errorf("server saw %d bytes on %d connections; want nothing", n, a)
	}
	h.mustGet("/fine", "ok")
	h.settle()
}

func TestResponseHeaderTimeoutIsATimeoutWithUnknownOutcome(t *testing.T) {
	h := newHarness(t, Config{ResponseHeaderTimeout: 100 * time.Millisecond}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			if c.id == 1 {
				c.drainUntilClosed() // never answers
				return ""
			}
			return okResponse
		})
	})
	_, _, err := h.do(h.newRequest("GET", "/slow", nil))
	var ne net.Error
	if !errors.Is(err, ErrResponseHeaderTimeout) || !errors.Is(err, ErrOutcomeUnknown) ||
		!errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("silent server: %v; want ErrResponseHeaderTimeout, a net.Error timeout", err)
	}
	h.mustGet("/2", "ok")
	h.settle()
}

// A request on a fresh connection is never retried, even when idempotent.
func TestRequestOnNewConnectionIsNotRetried(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		if c.id == 1 {
			c.readRequest()
			return
		}
		c.serve(func(int, *http.Request) string { return okResponse })
	})
	_, _, err := h.do(h.newRequest("GET", "/1", nil))
	if !errors.Is(err, ErrOutcomeUnknown) || !strings.Contains(err.Error(), "without answering") {
		t.Fatalf("dropped first request: %v; want outcome unknown, server closed without answering", err)
	}
	wantLog(t, h.srv.requestLog(), "c1 GET /1")
	h.mustGet("/2", "ok")
	h.settle()
}

func TestCanceledContextInterruptsBodyRead(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			if c.id == 1 {
				return "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"
			}
			return okResponse
		})
	})
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := h.c.RoundTrip(h.newRequest("GET", "/1", nil).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	go cancel() // owned by the runtime; the read below returns when it runs
	_, err = io.ReadAll(resp.Body)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v; want context.Canceled", err)
	}
	resp.Body.Close()
	h.mustGet("/2", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c2 GET /2")
	h.settle()
}

// LeaseTimeout bounds each wait for a connection, not the request: a request
// that waited for its first connection, had its exchange fail on that re-used
// connection after longer than LeaseTimeout, and is replayed, waits for the
// replay's new connection with a LeaseTimeout of its own. (The timer used to
// start at the first wait and run through the exchange, so the replay's wait
// found it expired and failed at once with ErrLeaseTimeout.) The waits run on
// the fake clock of a testing/synctest bubble.
func TestLeaseTimeoutBoundsEachWaitNotTheRequest(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		var h *harness
		var dials atomic.Int32
		slowDial := func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) > 1 {
				time.Sleep(50 * time.Millisecond) // the replay's connection takes a moment: its lease waits
			}
			return h.dial(ctx, network, addr)
		}
		h = newMemHarness(t, Config{MaxConnsPerRoute: 1, MaxConnsTotal: 1, LeaseTimeout: 300 * time.Millisecond, DialContext: slowDial},
			func(c *rawConn) {
				if c.id > 1 {
					c.serve(func(int, *http.Request) string { return okResponse })
					return
				}
				if _, _, err := c.readRequest(); err != nil || c.write(okResponse) != nil { // /hold
					return
				}
				if _, _, err := c.readRequest(); err != nil { // /slow: longer than LeaseTimeout, then no answer
					return
				}
				time.Sleep(400 * time.Millisecond)
			})
		held, err := h.c.RoundTrip(h.newRequest("GET", "/hold", nil))
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			body string
			err  error
		}
		done := make(chan result, 1)
		go func() { // owned by the test: ends with the request
			_, body, err := h.do(h.newRequest("GET", "/slow", nil))
			done <- result{body, err}
		}()
		waitFor(t, "the second request waiting for the connection", func() bool { return h.c.Stats().Pending == 1 })
		time.Sleep(100 * time.Millisecond) // it waits a while: LeaseTimeout's clock runs
		held.Body.Close()
		r := <-done
		if r.err != nil || r.body != "ok" {
			t.Fatalf("GET /slow: %q, %v; want ok, replayed on a new connection within a LeaseTimeout of its own", r.body, r.err)
		}
		wantLog(t, h.srv.requestLog(), "c1 GET /hold", "c1 GET /slow", "c2 GET /slow")
		h.settle()
	})
}
