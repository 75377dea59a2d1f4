package client

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Re-use decisions (RFC 9112 section 9), each against a raw server that keeps
// its side of the connection open, so that only the client's decision counts.

func TestConnectionCloseResponseIsNotReused(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
		})
	})
	h.mustGet("/1", "ok")
	h.mustGet("/2", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c2 GET /2")
	if n := h.closedBy("not_reusable"); n != 2 {
		t.Errorf("closed as not reusable: %d, want 2", n)
	}
	h.settle()
}

// The actors of closed connections are kept for the route's next dials, a
// few at most, and Stats counts them.
func TestClosedConnectionsLeaveAFewSpareActors(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
		})
	})
	spares := func() int {
		n := 0
		for _, r := range h.c.Stats().Routes {
			n += r.SpareActors
		}
		return n
	}
	h.mustGet("/1", "ok")
	waitFor(t, "the closed connection's actor kept as a spare", func() bool { return spares() == 1 })
	for i := range 5 {
		h.mustGet(fmt.Sprintf("/%d", i+2), "ok")
		if n := spares(); n > 2 {
			t.Fatalf("%d spare actors, want at most 2", n)
		}
	}
	if n := h.closedBy("not_reusable"); n != 6 {
		t.Errorf("closed as not reusable: %d, want 6", n)
	}
	h.settle()
}

// A route left without connections stops its spare actors after MaxIdleTime,
// and with them itself (it reclaims itself unused): the supervisor's expiry
// ticks reach a route that has spares only. The next request gets a new route.
func TestQuietRouteStopsItsSpareActors(t *testing.T) {
	h := newHarness(t, Config{MaxIdleTime: 200 * time.Millisecond}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
		})
	})
	h.mustGet("/1", "ok")
	waitFor(t, "the route and its spare actor stopped", func() bool {
		st := h.c.Stats()
		return len(st.Routes) == 0 && st.RoutesReclaimed == 1
	})
	h.mustGet("/2", "ok") // a new actor dials
	h.settle()
}

func TestRequestConnectionCloseIsNotReused(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string { return okResponse })
	})
	req := h.newRequest("GET", "/1", nil)
	req.Close = true
	if _, body, err := h.do(req); err != nil || body != "ok" {
		t.Fatalf("GET with Close: %q, %v", body, err)
	}
	h.mustGet("/2", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c2 GET /2")
	h.settle()
}

func TestHTTP10ResponseWithoutKeepAliveIsNotReused(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string { return "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok" })
	})
	h.mustGet("/1", "ok")
	h.mustGet("/2", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c2 GET /2")
	h.settle()
}

func TestHTTP10ResponseWithKeepAliveIsReused(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			return "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"
		})
	})
	h.mustGet("/1", "ok")
	h.mustGet("/2", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c1 GET /2")
	h.settle()
}

// The server announces "Keep-Alive: timeout=1" but never closes: the pool must
// retire the connection itself a little before the second is up, both when a
// request comes after that time and when none comes at all (the expiry tick).
// The bubble's fake clock (testing/synctest) makes the waits instant.
func TestKeepAliveTimeoutRetiresIdleConnection(t *testing.T) {
	inBubble(t, func(t *testing.T) {
		h := newMemHarness(t, Config{}, func(c *rawConn) {
			c.serve(func(int, *http.Request) string {
				return "HTTP/1.1 200 OK\r\nKeep-Alive: timeout=1, max=100\r\nContent-Length: 2\r\n\r\nok"
			})
		})
		h.mustGet("/1", "ok")
		time.Sleep(300 * time.Millisecond) // well within the server's second
		h.mustGet("/2", "ok")
		time.Sleep(950 * time.Millisecond) // past 0.9s: the pool's cap for timeout=1
		h.mustGet("/3", "ok")
		wantLog(t, h.srv.requestLog(), "c1 GET /1", "c1 GET /2", "c2 GET /3")
		if n := h.closedBy("keepalive_timeout"); n != 1 {
			t.Errorf("closed for keep-alive timeout: %d, want 1", n)
		}
		// No further request: the expiry tick closes the second connection too.
		waitFor(t, "the idle connection to be retired", func() bool { return h.closedBy("keepalive_timeout") == 2 })
		if st := h.c.Stats(); st.Idle != 0 || st.Open != 0 {
			t.Errorf("after keep-alive expiry: %d idle, %d open", st.Idle, st.Open)
		}
		h.settle()
	})
}

func TestBodyDelimitedByCloseIsReadToEOFAndNotReused(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		if _, _, err := c.readRequest(); err != nil {
			return
		}
		c.write("HTTP/1.1 200 OK\r\n\r\n" + strings.Repeat("x", 100000))
		// Returning closes the connection: that ends the body.
	})
	resp, body, err := h.do(h.newRequest("GET", "/eof", nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ContentLength != -1 || len(body) != 100000 {
		t.Fatalf("content length %d, body %d bytes; want -1, 100000", resp.ContentLength, len(body))
	}
	h.mustGet("/next", strings.Repeat("x", 100000))
	wantLog(t, h.srv.requestLog(), "c1 GET /eof", "c2 GET /next")
	if n := h.closedBy("not_reusable"); n != 2 {
		t.Errorf("closed as not reusable: %d, want 2", n)
	}
	h.settle()
}

func TestEarlyHintsThenFinalResponseOnOneConnection(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			return "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" + okResponse
		})
	})
	var tl traceLog
	resp, body, err := h.do(tl.traced(h.newRequest("GET", "/1", nil)))
	if err != nil || resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("got %v %q %v, want 200 ok", resp, body, err)
	}
	if !contains(tl.list(), "Got1xxResponse 103") {
		t.Errorf("trace %q lacks Got1xxResponse 103", tl.list())
	}
	h.mustGet("/2", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c1 GET /2")
	h.settle()
}

// Responses without a body keep the connection, whatever Content-Length says.
func TestBodilessResponsesKeepConnection(t *testing.T) {
	for _, tc := range []struct{ name, method, head string }{
		{"HEAD", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"},
		{"204", "GET", "HTTP/1.1 204 No Content\r\n\r\n"},
		{"304", "GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 1000\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{}, func(c *rawConn) {
				c.serve(func(n int, _ *http.Request) string {
					if n == 1 {
						return tc.head
					}
					return okResponse
				})
			})
			resp, body, err := h.do(h.newRequest(tc.method, "/1", nil))
			if err != nil || body != "" {
				t.Fatalf("%s: body %q, err %v", tc.name, body, err)
			}
			if resp.Body != http.NoBody {
				t.Errorf("body is %T, want http.NoBody", resp.Body)
			}
			h.mustGet("/2", "ok")
			wantLog(t, h.srv.requestLog(), fmt.Sprintf("c1 %s /1", tc.method), "c1 GET /2")
			h.settle()
		})
	}
}

// Closing a body early with a large remainder must not drain it: the client
// reads a few KiB at most and the connection is discarded.
func TestClosingLargeBodyEarlyReturnsAtOnceAndPoolRecovers(t *testing.T) {
	const size = 10 << 20
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string {
			if c.id == 1 {
				return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", size, strings.Repeat("z", size))
			}
			return okResponse
		})
	})
	resp, err := h.c.RoundTrip(h.newRequest("GET", "/big", nil))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { // owned by this test, which waits for it below
		resp.Body.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close of a 10 MiB body after 10 bytes did not return")
	}
	if n := h.bytesRead.Load(); n > 16<<10 {
		t.Errorf("client read %d bytes of a 10 MiB response: it drained instead of closing", n)
	}
	if _, err := resp.Body.Read(buf); err == nil {
		t.Error("read after Close succeeded")
	}
	h.mustGet("/next", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /big", "c2 GET /next")
	if n := h.closedBy("not_reusable"); n != 1 {
		t.Errorf("closed as not reusable: %d, want 1", n)
	}
	h.settle()
}

func TestClosingBodyWithSmallRemainderDrainsAndReuses(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(n int, _ *http.Request) string {
			if n == 1 {
				return "HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n" + strings.Repeat("s", 20000)
			}
			return okResponse
		})
	})
	resp, err := h.c.RoundTrip(h.newRequest("GET", "/small", nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h.mustGet("/next", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /small", "c1 GET /next")
	h.settle()
}

// A body nobody reads holds its connection: Stats shows it leased until Close.
func TestUnreadBodyHoldsItsConnectionUntilClosed(t *testing.T) {
	h := newHarness(t, Config{}, func(c *rawConn) {
		c.serve(func(int, *http.Request) string { return okResponse })
	})
	resp, err := h.c.RoundTrip(h.newRequest("GET", "/1", nil))
	if err != nil {
		t.Fatal(err)
	}
	if st := h.c.Stats(); st.Leased != 1 || st.InFlight != 1 {
		t.Errorf("with an unread body: leased %d, in flight %d; want 1, 1", st.Leased, st.InFlight)
	}
	resp.Body.Close()
	h.mustGet("/2", "ok")
	wantLog(t, h.srv.requestLog(), "c1 GET /1", "c1 GET /2")
	h.settle()
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
